// Refunds and disputes (issue 15), black-box against the Stripe and Creem stubs sending the real
// event shapes: a refund debits the credits the payment bought, exactly once though delivered
// 5 times (3 at once); partial refunds debit in proportion; a dispute debits what is left; the
// balance never goes below zero and the shortfall is shown to the admin.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import type { CreemStub } from '../stubs/creem.ts';
import type { StripeStub } from '../stubs/stripe.ts';
import { creditsOf as credits, startPaymentWorld, type PaymentWorld } from './payment-setup.ts';
import { assertBooksBalance, cityWithUser, row, type Client } from './setup.ts';

let world: PaymentWorld;
let stripe: StripeStub;
let creem: CreemStub;
let gw: TestGateway;
let admin: Client;

before(async () => {
  world = await startPaymentWorld();
  ({ stripe, creem, gw, admin } = world);
});
after(() => world?.close());

const outcome = (d: { body: string }) => JSON.parse(d.body).outcome as string;

/** Buys `amount` credits with Stripe and returns the session id once credited. */
async function stripeTopUp(user: Client, amount: number): Promise<string> {
  const r = await user.post('/v1/payment/checkout', { method: 'a', credits: amount });
  assert.equal(r.status, 200, r.text);
  const sessionId = [...stripe.sessions.values()].at(-1)!.id;
  assert.equal(outcome(await stripe.pay(sessionId)), 'credited');
  return sessionId;
}

/** Delivers an event 5 times, 3 of them at once; returns the outcomes. */
async function fiveTimes(deliver: () => Promise<{ status: number; body: string }>): Promise<string[]> {
  const first = await deliver();
  const concurrent = await Promise.all([deliver(), deliver(), deliver()]);
  const last = await deliver();
  const all = [first, ...concurrent, last];
  for (const d of all) assert.equal(d.status, 200, d.body);
  return all.map(outcome);
}

const ledgerRows = async (kindReason: string) =>
  (await row<{ n: number }>(gw, `SELECT COUNT(*) AS n FROM ledger WHERE reason LIKE ?`, [`${kindReason}%`])).n;

describe('Stripe', () => {
  test('charge.refunded delivered 5 times (3 at once) debits the credits once', async () => {
    const u = client(gw.url, await cityWithUser(admin, 'ref-a', 'rita'));
    const b0 = await credits(u);
    const session = await stripeTopUp(u, 2_000_000);
    assert.equal(await credits(u), b0 + 2_000_000);

    const event = stripe.refundSession(session);
    assert.equal(event.type, 'charge.refunded');
    assert.equal((event.data.object as { object: string }).object, 'charge');
    const outcomes = await fiveTimes(() => stripe.deliverWebhook(event));
    assert.deepEqual(outcomes, ['refunded', 'already_refunded', 'already_refunded', 'already_refunded', 'already_refunded']);
    assert.equal(await credits(u), b0, 'exactly the credits bought were taken back');
    assert.equal(await ledgerRows('refund stripe'), 1);
    await assertBooksBalance(gw);
  });

  test('partial refunds debit in proportion; a dispute takes what is left; never below zero, the shortfall is shown to the admin', async () => {
    const u = client(gw.url, await cityWithUser(admin, 'ref-b', 'sam'));
    const b0 = await credits(u);
    const session = await stripeTopUp(u, 4_000_000); // 400 cents
    assert.equal(outcome(await stripe.deliverWebhook(stripe.refundSession(session, 100))), 'refunded');
    assert.equal(await credits(u), b0 + 3_000_000, 'a quarter refunded: a quarter of the credits debited');

    // The user spends most of what is left, then disputes the rest of the charge.
    const spent = await admin.post('/v1/balance/adjust', { city_id: 'ref-b', user_id: 'sam', credits: -(b0 + 2_500_000), reason: 'spent', idempotency_key: 'spend-sam' });
    assert.equal(spent.status, 200, spent.text);
    assert.equal(await credits(u), 500_000);
    const dispute = stripe.disputeSession(session);
    assert.equal(dispute.type, 'charge.dispute.created');
    const outcomes = await fiveTimes(() => stripe.deliverWebhook(dispute));
    assert.equal(outcomes.filter((o) => o === 'refunded').length, 1);
    assert.equal(await credits(u), 0, 'never below zero');

    const list = await admin.get('/v1/payment/refunds?city_id=ref-b');
    assert.equal(list.status, 200, list.text);
    const d = list.body.items.find((x: { kind: string }) => x.kind === 'dispute');
    assert.equal(d.credits_due, 3_000_000);
    assert.equal(d.credits_debited, 500_000);
    assert.equal(d.shortfall, 2_500_000);
    const r = list.body.items.find((x: { kind: string }) => x.kind === 'refund');
    assert.deepEqual([r.amount, r.credits_due, r.credits_debited, r.shortfall], [100, 1_000_000, 1_000_000, 0]);
    const only = await admin.get('/v1/payment/refunds?shortfall_only=true');
    assert.ok(only.body.items.every((x: { shortfall: number }) => x.shortfall > 0));
    assert.ok(only.body.items.some((x: { payment_id: string }) => x.payment_id === d.payment_id));
    assert.equal((await u.get('/v1/payment/refunds')).status, 403, 'users do not see the refund list');
    await assertBooksBalance(gw);
  });

  test('a refund of a payment never credited changes nothing', async () => {
    const u = client(gw.url, await cityWithUser(admin, 'ref-c', 'tom'));
    const b0 = await credits(u);
    await u.post('/v1/payment/checkout', { method: 'a', credits: 1_000_000 });
    const sessionId = [...stripe.sessions.values()].at(-1)!.id;
    stripe.completeSession(sessionId); // paid at Stripe, but the webhook never arrived
    const d = await stripe.deliverWebhook(stripe.refundSession(sessionId));
    assert.equal(d.status, 200, d.body);
    assert.equal(outcome(d), 'not_credited');
    assert.equal(await credits(u), b0);
  });
});

describe('Creem', () => {
  test('refund.created delivered 5 times (3 at once) debits the credits once; an unsigned one is refused', async () => {
    const u = client(gw.url, await cityWithUser(admin, 'ref-d', 'una'));
    const b0 = await credits(u);
    const r = await u.post('/v1/payment/checkout', { method: 'b', credits: 5_000_000 });
    assert.equal(r.status, 200, r.text);
    const checkoutId = [...creem.checkouts.values()].at(-1)!.id;
    assert.equal(outcome(await creem.pay(checkoutId)), 'credited');
    assert.equal(await credits(u), b0 + 5_000_000);

    const event = creem.refundCheckout(checkoutId);
    assert.equal(event.eventType, 'refund.created');
    const forged = await creem.deliverWebhook(event, { signature: 'f'.repeat(64) });
    assert.equal(forged.status, 400);
    assert.equal(await credits(u), b0 + 5_000_000);

    const outcomes = await fiveTimes(() => creem.deliverWebhook(event));
    assert.deepEqual(outcomes.sort(), ['already_refunded', 'already_refunded', 'already_refunded', 'already_refunded', 'refunded']);
    assert.equal(await credits(u), b0);
    assert.equal(await ledgerRows('refund creem'), 1);
    await assertBooksBalance(gw);
  });
});
