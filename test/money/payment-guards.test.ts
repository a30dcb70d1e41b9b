// payment guards, black-box: what a verified event that does not match its checkout does.
// An underpaid checkout (a discount at the provider) is credited pro rata — never more than
// was paid — and the shortfall is on the payment for the admin; a wrong currency, a checkout
// id that is not the payment's, an unknown payment and a too large checkout change nothing.
// Both providers: Stripe (stub) and Creem (stub), events signed with the webhook secrets.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';
import type { CreemStub } from '../stubs/creem.ts';
import type { StripeStub } from '../stubs/stripe.ts';
import { creditsOf, signedCreem as signedCreemTo, signedStripe as signedStripeTo, startPaymentWorld, type PaymentWorld } from './payment-setup.ts';
import { assertBooksBalance, cityWithUser, rows, type Client } from './setup.ts';

let world: PaymentWorld;
let stripe: StripeStub;
let creem: CreemStub;
let gw: TestGateway;
let admin: Client;
let alice: Client;

before(async () => {
  world = await startPaymentWorld();
  ({ stripe, creem, gw, admin } = world);
  alice = client(gw.url, await cityWithUser(admin, 'guard-a', 'alice'));
});
after(() => world?.close());

const credits = () => creditsOf(alice);
const adminView = async (paymentId: string) =>
  (await admin.get('/v1/payment/payments?city_id=guard-a&limit=200')).body.items.find((p: { payment_id: string }) => p.payment_id === paymentId);
const signedStripe = (event: unknown) => signedStripeTo(gw, event);
const signedCreem = (event: unknown) => signedCreemTo(gw, event);
const topups = async (paymentId: string) =>
  (await rows<{ credits: number }>(gw, `SELECT credits FROM ledger WHERE kind = 'topup' AND ref = ?`, [paymentId])).map((r) => r.credits);

describe('provider A (Stripe)', () => {
  test('an underpaid checkout is credited what was paid, once; the admin sees the shortfall', async () => {
    const b0 = await credits();
    const r = await alice.post('/v1/payment/checkout', { method: 'a', credits: 2_000_000 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.amount, 200);
    const session = [...stripe.sessions.values()].at(-1)!;
    const event = stripe.completeSession(session.id, {}, { discount: 50 }); // 1.50 of 2.00 paid
    const d = await stripe.deliverWebhook(event);
    assert.equal(d.status, 200, d.body);
    assert.equal(JSON.parse(d.body).outcome, 'credited');
    assert.equal(await credits(), b0 + 1_500_000, 'credited 150 cents at 1,000,000 credits per USD');
    assert.equal(JSON.parse((await stripe.deliverWebhook(event)).body).outcome, 'already_paid');
    assert.equal(await credits(), b0 + 1_500_000);
    const p = await adminView(r.body.payment_id);
    assert.deepEqual(
      [p.status, p.credits, p.amount, p.amount_paid, p.credited, p.shortfall],
      ['paid', 2_000_000, 200, 150, 1_500_000, 50],
    );
    assert.deepEqual(await topups(r.body.payment_id), [1_500_000]);
    await assertBooksBalance(gw);
  });

  test('a paid event in another currency, for another checkout, or for no known payment changes nothing', async () => {
    const b0 = await credits();
    const r1 = await alice.post('/v1/payment/checkout', { method: 'a', credits: 1_000_000 });
    const s1 = [...stripe.sessions.values()].at(-1)!;
    const r2 = await alice.post('/v1/payment/checkout', { method: 'a', credits: 3_000_000 });
    const s2 = [...stripe.sessions.values()].at(-1)!;
    const paid1 = stripe.completeSession(s1.id);
    const euro = { ...paid1, id: `${paid1.id}_eur`, data: { object: { ...paid1.data.object, currency: 'eur' } } };
    const cur = await signedStripe(euro);
    assert.equal(cur.status, 200, cur.text);
    assert.equal(cur.body.outcome, 'currency_mismatch');
    // session 2, paid, but claiming payment 1 (whose checkout is session 1)
    const paid2 = stripe.completeSession(s2.id);
    const swapped = { ...paid2, id: `${paid2.id}_swap`, data: { object: { ...paid2.data.object, metadata: { payment_id: r1.body.payment_id }, client_reference_id: r1.body.payment_id } } };
    const ref = await signedStripe(swapped);
    assert.equal(ref.status, 200, ref.text);
    assert.equal(ref.body.outcome, 'ref_mismatch');
    const ghost = { ...paid2, id: `${paid2.id}_ghost`, data: { object: { ...paid2.data.object, id: 'cs_test_nobody', metadata: { payment_id: 'pay_nobody_nobody' }, client_reference_id: null } } };
    const unknown = await signedStripe(ghost);
    assert.equal(unknown.status, 200, unknown.text);
    assert.equal(unknown.body.outcome, 'unknown_payment');
    assert.equal(await credits(), b0);
    assert.equal((await adminView(r1.body.payment_id)).status, 'pending');
    assert.equal((await adminView(r2.body.payment_id)).status, 'pending');
    // the genuine events still credit, each exactly its own payment
    assert.equal(JSON.parse((await stripe.deliverWebhook(paid1)).body).outcome, 'credited');
    assert.equal(JSON.parse((await stripe.deliverWebhook(paid2)).body).outcome, 'credited');
    assert.equal(await credits(), b0 + 4_000_000);
    await assertBooksBalance(gw);
  });

  test('PAYMENT_MAX_AMOUNT: a larger checkout is 400 amount_too_large, nothing recorded, no session', async () => {
    await admin.post('/v1/env/upsert', { key: 'PAYMENT_MAX_AMOUNT', value: '1000' });
    try {
      const mine = (await alice.get('/v1/payment/payments/me?limit=200')).body.items.length;
      const sessions = stripe.sessions.size;
      const r = await alice.post('/v1/payment/checkout', { method: 'a', credits: 10_000_001 }); // 1001 cents
      assert.equal(r.status, 400, r.text);
      assert.equal(errorOf(r).code, 'amount_too_large');
      assert.equal((await alice.get('/v1/payment/payments/me?limit=200')).body.items.length, mine);
      assert.equal(stripe.sessions.size, sessions);
      const ok = await alice.post('/v1/payment/checkout', { method: 'a', credits: 10_000_000 }); // exactly 1000
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.body.amount, 1000);
    } finally {
      await admin.post('/v1/env/remove', { key: 'PAYMENT_MAX_AMOUNT' });
    }
  });
});

describe('provider B (Creem)', () => {
  test('an underpaid checkout (discount code) is credited what was paid, once; the admin sees the shortfall', async () => {
    const b0 = await credits();
    const r = await alice.post('/v1/payment/checkout', { method: 'b', credits: 5_000_000 });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual([r.body.units, r.body.amount], [1, 500]);
    const checkout = [...creem.checkouts.values()].at(-1)!;
    const event = creem.completeCheckout(checkout.id, {}, { discount: 100 }); // 4.00 of 5.00 paid
    const d = await creem.deliverWebhook(event);
    assert.equal(d.status, 200, d.body);
    assert.equal(JSON.parse(d.body).outcome, 'credited');
    assert.equal(await credits(), b0 + 4_000_000);
    assert.equal(JSON.parse((await creem.deliverWebhook(event)).body).outcome, 'already_paid');
    assert.equal(await credits(), b0 + 4_000_000);
    const p = await adminView(r.body.payment_id);
    assert.deepEqual([p.status, p.credits, p.amount, p.amount_paid, p.credited, p.shortfall], ['paid', 5_000_000, 500, 400, 4_000_000, 100]);
    assert.deepEqual(await topups(r.body.payment_id), [4_000_000]);
    await assertBooksBalance(gw);
  });

  test('a paid event in another currency, for another checkout, or for no known payment changes nothing', async () => {
    const b0 = await credits();
    const r1 = await alice.post('/v1/payment/checkout', { method: 'b', credits: 5_000_000 });
    const c1 = [...creem.checkouts.values()].at(-1)!;
    const r2 = await alice.post('/v1/payment/checkout', { method: 'b', credits: 10_000_000 });
    const c2 = [...creem.checkouts.values()].at(-1)!;
    const paid1 = creem.completeCheckout(c1.id);
    const o1 = paid1.object as Record<string, any>;
    const cur = await signedCreem({ ...paid1, id: `${paid1.id}_eur`, object: { ...o1, order: { ...o1.order, currency: 'EUR' } } });
    assert.equal(cur.status, 200, cur.text);
    assert.equal(cur.body.outcome, 'currency_mismatch');
    const paid2 = creem.completeCheckout(c2.id);
    const o2 = paid2.object as Record<string, any>;
    const ref = await signedCreem({ ...paid2, id: `${paid2.id}_swap`, object: { ...o2, request_id: r1.body.payment_id, metadata: { ...o2.metadata, payment_id: r1.body.payment_id } } });
    assert.equal(ref.status, 200, ref.text);
    assert.equal(ref.body.outcome, 'ref_mismatch');
    const unknown = await signedCreem({ ...paid2, id: `${paid2.id}_ghost`, object: { ...o2, id: 'ch_nobody', request_id: 'pay_nobody_nobody', metadata: {} } });
    assert.equal(unknown.status, 200, unknown.text);
    assert.equal(unknown.body.outcome, 'unknown_payment');
    assert.equal(await credits(), b0);
    assert.equal((await adminView(r1.body.payment_id)).status, 'pending');
    assert.equal((await adminView(r2.body.payment_id)).status, 'pending');
    assert.equal(JSON.parse((await creem.deliverWebhook(paid1)).body).outcome, 'credited');
    assert.equal(JSON.parse((await creem.deliverWebhook(paid2)).body).outcome, 'credited');
    assert.equal(await credits(), b0 + 15_000_000);
    await assertBooksBalance(gw);
  });

  test('PAYMENT_MAX_AMOUNT: a larger checkout is 400 amount_too_large, nothing recorded, no checkout', async () => {
    await admin.post('/v1/env/upsert', { key: 'PAYMENT_MAX_AMOUNT', value: '1000' });
    try {
      const mine = (await alice.get('/v1/payment/payments/me?limit=200')).body.items.length;
      const checkouts = creem.checkouts.size;
      const r = await alice.post('/v1/payment/checkout', { method: 'b', credits: 10_000_001 }); // 3 units = 1500
      assert.equal(r.status, 400, r.text);
      assert.equal(errorOf(r).code, 'amount_too_large');
      assert.equal((await alice.get('/v1/payment/payments/me?limit=200')).body.items.length, mine);
      assert.equal(creem.checkouts.size, checkouts);
      const ok = await alice.post('/v1/payment/checkout', { method: 'b', credits: 10_000_000 }); // 2 units = 1000
      assert.equal(ok.status, 200, ok.text);
    } finally {
      await admin.post('/v1/env/remove', { key: 'PAYMENT_MAX_AMOUNT' });
    }
  });
});
