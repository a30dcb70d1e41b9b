// payment, black-box: citygate against the Stripe and Creem stubs, webhooks delivered by the
// stubs themselves (or replayed and forged by the test).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TestGateway } from '../helpers/gateway.ts';
import { call, client, errorOf } from '../helpers/http.ts';
import { signCreemPayload, type CreemStub } from '../stubs/creem.ts';
import { signStripePayload, type StripeStub } from '../stubs/stripe.ts';
import { CREEM_WHSEC, creditsOf as credits, postWebhook, startPaymentWorld, STRIPE_WHSEC, type PaymentWorld } from './payment-setup.ts';
import { assertBooksBalance, cityWithUser, row, type Client } from './setup.ts';

let world: PaymentWorld;
let stripe: StripeStub;
let creem: CreemStub;
let gw: TestGateway;
let admin: Client;
let alice: Client;
let bob: Client; // another city

before(async () => {
  world = await startPaymentWorld({ GATEWAY_CITY_BASE_URL: 'https://pay.city.example' });
  ({ stripe, creem, gw, admin } = world);
  alice = client(gw.url, await cityWithUser(admin, 'pay-a', 'alice'));
  bob = client(gw.url, await cityWithUser(admin, 'pay-b', 'bob'));
});
after(() => world?.close());

const webhook = (path: string, raw: string, headers: Record<string, string>) => postWebhook(gw, path, raw, headers);

describe('methods', () => {
  test('guests see both methods with enabled flags; without keys a method says why not', async () => {
    const r = await call(gw.url, 'GET', '/v1/payment/methods');
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.body.items.map((m: { method: string; provider: string; enabled: boolean }) => [m.method, m.provider, m.enabled]),
      [['a', 'stripe', true], ['b', 'creem', true]],
    );
    assert.equal(r.body.credits_per_usd, 1_000_000);
    await admin.post('/v1/env/upsert', { key: 'PAYMENT_B_PRODUCT_ID', value: '' });
    try {
      const off = (await call(gw.url, 'GET', '/v1/payment/methods')).body.items[1];
      assert.equal(off.enabled, false);
      assert.match(off.reason, /PAYMENT_B_PRODUCT_ID/);
      const refused = await alice.post('/v1/payment/checkout', { method: 'b', credits: 5_000_000 });
      assert.equal(refused.status, 400);
      assert.equal(errorOf(refused).code, 'payment_method_disabled');
    } finally {
      await admin.post('/v1/env/upsert', { key: 'PAYMENT_B_PRODUCT_ID', value: 'prod_credits' });
    }
  });
});

describe('provider A (Stripe)', () => {
  test('checkout returns the stub’s URL and records amount, currency and credits', async () => {
    const r = await alice.post('/v1/payment/checkout', { method: 'a', credits: 2_500_000 });
    assert.equal(r.status, 200, r.text);
    assert.match(r.body.payment_id, /^pay_/);
    assert.ok(r.body.checkout_url.startsWith(`${stripe.origin}/c/pay/cs_test_`), r.body.checkout_url);
    assert.deepEqual([r.body.amount, r.body.currency, r.body.credits, r.body.status], [250, 'usd', 2_500_000, 'pending']);
    const session = [...stripe.sessions.values()].at(-1)!;
    assert.equal(session.url, r.body.checkout_url);
    assert.equal(session.amount_total, 250);
    assert.equal(session.metadata.payment_id, r.body.payment_id);
    assert.equal(session.success_url, `https://pay.city.example/v1/payment/redirect/success?payment_id=${r.body.payment_id}`);
    assert.equal(session.cancel_url, `https://pay.city.example/v1/payment/redirect/cancel?payment_id=${r.body.payment_id}`);
    const mine = (await alice.get('/v1/payment/payments/me')).body.items.find((p: { payment_id: string }) => p.payment_id === r.body.payment_id);
    assert.deepEqual([mine.status, mine.amount, mine.currency, mine.credits, mine.provider], ['pending', 250, 'usd', 2_500_000, 'stripe']);
    const small = await alice.post('/v1/payment/checkout', { method: 'stripe', credits: 400_000 });
    assert.equal(small.status, 400);
    assert.equal(errorOf(small).code, 'amount_too_small');
  });

  test('a signed paid webhook credits once though delivered 5 times, 3 of them at once', async () => {
    const before = await credits(alice);
    const r = await alice.post('/v1/payment/checkout', { method: 'a', credits: 1_000_000 });
    const sessionId = [...stripe.sessions.values()].at(-1)!.id;
    const event = stripe.completeSession(sessionId);
    const first = await stripe.deliverWebhook(event);
    assert.equal(first.status, 200, first.body);
    assert.equal(JSON.parse(first.body).outcome, 'credited');
    const concurrent = await Promise.all([stripe.deliverWebhook(event), stripe.deliverWebhook(event), stripe.deliverWebhook(event)]);
    const last = await stripe.deliverWebhook(event);
    for (const d of [...concurrent, last]) {
      assert.equal(d.status, 200);
      assert.equal(JSON.parse(d.body).outcome, 'already_paid');
    }
    assert.equal(await credits(alice), before + 1_000_000);
    const p = (await alice.get('/v1/payment/payments/me')).body.items.find((x: { payment_id: string }) => x.payment_id === r.body.payment_id);
    assert.equal(p.status, 'paid');
    assert.equal(p.amount_paid, 100);
    const topups = await row<{ n: number }>(gw, `SELECT COUNT(*) AS n FROM ledger WHERE kind = 'topup' AND ref = ?`, [r.body.payment_id]);
    assert.equal(topups.n, 1);
    const ev = await row<{ deliveries: number }>(gw, `SELECT deliveries FROM payment_events WHERE event_id = ?`, [event.id]);
    assert.equal(ev.deliveries, 5);
    await assertBooksBalance(gw);
  });

  test('the hosted page’s Pay button: webhook credits, success page confirms', async () => {
    const before = await credits(alice);
    const r = await alice.post('/v1/payment/checkout', { method: 'a', credits: 600_000 });
    const pay = await fetch(r.body.checkout_url, { method: 'POST', redirect: 'manual' });
    assert.equal(pay.status, 303);
    assert.equal(stripe.deliveries.at(-1)!.status, 200);
    assert.equal(await credits(alice), before + 600_000);
    const page = await fetch(`${gw.url}/v1/payment/redirect/success?payment_id=${r.body.payment_id}`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type')!, /text\/html/);
    assert.match(await page.text(), /600,000 credits were added/);
    const cancel = await fetch(`${gw.url}/v1/payment/redirect/cancel?payment_id=${r.body.payment_id}`);
    assert.equal(cancel.status, 200);
    assert.match(await cancel.text(), /cancelled/);
  });

  test('a bad, stale or future-stamped signature is a 400 and changes nothing', async () => {
    const before = await credits(alice);
    await alice.post('/v1/payment/checkout', { method: 'a', credits: 700_000 });
    const session = [...stripe.sessions.values()].at(-1)!;
    const event = stripe.completeSession(session.id);
    const payload = JSON.stringify(event, null, 2);
    const cases = {
      'wrong secret': signStripePayload(payload, 'whsec_not_ours'),
      stale: signStripePayload(payload, STRIPE_WHSEC, Math.floor(Date.now() / 1000) - 301),
      'an hour in the future': signStripePayload(payload, STRIPE_WHSEC, Math.floor(Date.now() / 1000) + 3600),
      'just past the tolerance, in the future': signStripePayload(payload, STRIPE_WHSEC, Math.floor(Date.now() / 1000) + 320),
      garbage: 't=1,v1=00',
    };
    for (const [name, sig] of Object.entries(cases)) {
      const r = await webhook('/v1/payment/webhook/a', payload, { 'stripe-signature': sig });
      assert.equal(r.status, 400, name);
      assert.equal(errorOf(r).code, 'invalid_signature', name);
    }
    const tampered = await webhook('/v1/payment/webhook/a', payload.replace('"amount_total": 70', '"amount_total": 7'), { 'stripe-signature': signStripePayload(payload, STRIPE_WHSEC) });
    assert.equal(tampered.status, 400);
    assert.equal((await webhook('/v1/payment/webhook/a', payload, {})).status, 400, 'no signature header');
    assert.equal(await credits(alice), before);
    const ok = await stripe.deliverWebhook(event);
    assert.equal(ok.status, 200);
    assert.equal(await credits(alice), before + 700_000);
  });

  test('expired after paid changes nothing; expired before paid never blocks the credit', async () => {
    const before = await credits(alice);
    const r = await alice.post('/v1/payment/checkout', { method: 'a', credits: 800_000 });
    const session = [...stripe.sessions.values()].at(-1)!;
    const paid = stripe.completeSession(session.id);
    await stripe.deliverWebhook(paid);
    // a forged-but-signed expiry (as if delivered out of order) for the same session
    const expired = { ...paid, id: `${paid.id}_exp`, type: 'checkout.session.expired', data: { object: { ...paid.data.object, status: 'expired' } } };
    const e1 = await stripe.deliverWebhook(expired as typeof paid);
    assert.equal(e1.status, 200);
    assert.equal(JSON.parse(e1.body).outcome, 'no_change');
    assert.equal(await credits(alice), before + 800_000);
    const p = (await admin.get(`/v1/payment/payments?city_id=pay-a`)).body.items.find((x: { payment_id: string }) => x.payment_id === r.body.payment_id);
    assert.equal(p.status, 'paid');

    // the other order: expired first, then paid (delivered late): credited once
    const r2 = await alice.post('/v1/payment/checkout', { method: 'a', credits: 900_000 });
    const s2 = [...stripe.sessions.values()].at(-1)!;
    const paid2 = stripe.completeSession(s2.id);
    const exp2 = { ...paid2, id: `${paid2.id}_exp`, type: 'checkout.session.expired', data: { object: { ...paid2.data.object, status: 'expired' } } };
    assert.equal(JSON.parse((await stripe.deliverWebhook(exp2 as typeof paid2)).body).outcome, 'expired');
    assert.equal(JSON.parse((await stripe.deliverWebhook(paid2)).body).outcome, 'credited');
    assert.equal(JSON.parse((await stripe.deliverWebhook(exp2 as typeof paid2)).body).outcome, 'no_change');
    assert.equal(await credits(alice), before + 800_000 + 900_000);
    const p2 = (await alice.get('/v1/payment/payments/me?status=paid')).body.items.find((x: { payment_id: string }) => x.payment_id === r2.body.payment_id);
    assert.ok(p2);

    // a real expiry of an unpaid session
    const r3 = await alice.post('/v1/payment/checkout', { method: 'a', credits: 1_000_000 });
    const s3 = [...stripe.sessions.values()].at(-1)!;
    await stripe.deliverWebhook(stripe.expireSession(s3.id));
    const p3 = (await alice.get('/v1/payment/payments/me')).body.items.find((x: { payment_id: string }) => x.payment_id === r3.body.payment_id);
    assert.equal(p3.status, 'expired');
    assert.equal(p3.checkout_url, null);
    assert.equal(await credits(alice), before + 800_000 + 900_000);
    await assertBooksBalance(gw);
  });

  test('without a webhook secret, events count only as Stripe’s API returns them', async () => {
    await admin.post('/v1/env/upsert', { key: 'PAYMENT_A_WEBHOOK_SECRET', value: '' });
    try {
      const before = await credits(alice);
      await alice.post('/v1/payment/checkout', { method: 'a', credits: 1_100_000 });
      const session = [...stripe.sessions.values()].at(-1)!;
      const forged = { id: 'evt_forged_123', type: 'checkout.session.completed', data: { object: { ...session, payment_status: 'paid', status: 'complete' } } };
      const f = await webhook('/v1/payment/webhook/a', JSON.stringify(forged), {});
      assert.equal(f.status, 400);
      assert.equal(errorOf(f).code, 'unverified_event');
      assert.equal(await credits(alice), before);
      const event = stripe.completeSession(session.id);
      const ok = await webhook('/v1/payment/webhook/a', JSON.stringify({ id: event.id }), {});
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.body.outcome, 'credited');
      assert.equal(await credits(alice), before + 1_100_000);
    } finally {
      await admin.post('/v1/env/upsert', { key: 'PAYMENT_A_WEBHOOK_SECRET', value: STRIPE_WHSEC });
    }
  });
});

describe('provider B (Creem)', () => {
  test('checkout: the stub’s URL, units of the product, credits and amount recorded', async () => {
    const r = await bob.post('/v1/payment/checkout', { method: 'b', credits: 12_000_000 });
    assert.equal(r.status, 200, r.text);
    assert.ok(r.body.checkout_url.startsWith(`${creem.origin}/test/checkout/ch_`));
    assert.deepEqual([r.body.units, r.body.credits, r.body.amount, r.body.currency], [3, 15_000_000, 1500, 'usd']);
    const checkout = [...creem.checkouts.values()].at(-1)!;
    assert.equal(checkout.request_id, r.body.payment_id);
    assert.equal(checkout.units, 3);
  });

  test('a signed checkout.completed credits once though delivered 5 times, 3 at once; bad signature → 400', async () => {
    const before = await credits(bob);
    const r = await bob.post('/v1/payment/checkout', { method: 'creem', credits: 5_000_000 });
    const checkout = [...creem.checkouts.values()].at(-1)!;
    const event = creem.completeCheckout(checkout.id);
    const payload = JSON.stringify(event);
    const bad = await webhook('/v1/payment/webhook/b', payload, { 'creem-signature': signCreemPayload(payload, 'not-the-secret') });
    assert.equal(bad.status, 400);
    assert.equal(errorOf(bad).code, 'invalid_signature');
    assert.equal((await webhook('/v1/payment/webhook/b', payload, {})).status, 400);
    assert.equal(await credits(bob), before);
    const outcomes = [(await creem.deliverWebhook(event)).body];
    outcomes.push(...(await Promise.all([creem.deliverWebhook(event), creem.deliverWebhook(event), creem.deliverWebhook(event)])).map((d) => d.body));
    outcomes.push((await creem.deliverWebhook(event)).body);
    assert.deepEqual(outcomes.map((b) => JSON.parse(b).outcome).sort(), ['already_paid', 'already_paid', 'already_paid', 'already_paid', 'credited']);
    assert.equal(await credits(bob), before + 5_000_000);
    const p = (await bob.get('/v1/payment/payments/me')).body.items.find((x: { payment_id: string }) => x.payment_id === r.body.payment_id);
    assert.deepEqual([p.status, p.amount_paid], ['paid', 500]);
    await assertBooksBalance(gw);
  });

  test('without a webhook secret, B credits only after the stub’s API confirms the checkout', async () => {
    await admin.post('/v1/env/upsert', { key: 'PAYMENT_B_WEBHOOK_SECRET', value: '' });
    try {
      const before = await credits(bob);
      const r = await bob.post('/v1/payment/checkout', { method: 'b', credits: 5_000_000 });
      const checkout = [...creem.checkouts.values()].at(-1)!;
      // a forged "completed" event while Creem still has the checkout pending
      const forged = {
        id: 'evt_forged',
        eventType: 'checkout.completed',
        created_at: Date.now(),
        object: { id: checkout.id, object: 'checkout', status: 'completed', request_id: r.body.payment_id, order: { status: 'paid', amount: 500, currency: 'USD' } },
      };
      const f = await webhook('/v1/payment/webhook/b', JSON.stringify(forged), { 'creem-signature': 'whatever' });
      assert.equal(f.status, 409);
      assert.equal(errorOf(f).code, 'not_confirmed');
      const unknown = await webhook('/v1/payment/webhook/b', JSON.stringify({ ...forged, object: { ...forged.object, id: 'ch_nope', request_id: 'pay_nope_nope_nope' } }), {});
      assert.equal(unknown.status, 400);
      assert.equal(await credits(bob), before);
      const reads = creem.requests.filter((q) => q.method === 'GET' && q.path === '/v1/checkouts').length;
      const paid = await creem.pay(checkout.id);
      assert.equal(paid.status, 200, paid.body);
      assert.equal(JSON.parse(paid.body).outcome, 'credited');
      assert.ok(creem.requests.filter((q) => q.method === 'GET' && q.path === '/v1/checkouts').length > reads, 'read back from the API');
      assert.equal(await credits(bob), before + 5_000_000);
      assert.equal(JSON.parse((await creem.deliverWebhook(paid.event)).body).outcome, 'already_paid');
      assert.equal(await credits(bob), before + 5_000_000);
    } finally {
      await admin.post('/v1/env/upsert', { key: 'PAYMENT_B_WEBHOOK_SECRET', value: CREEM_WHSEC });
    }
  });

  test('a missed webhook: the success page reads the checkout back and credits once', async () => {
    creem.setWebhook(undefined);
    try {
      const before = await credits(bob);
      const r = await bob.post('/v1/payment/checkout', { method: 'b', credits: 5_000_000 });
      const checkout = [...creem.checkouts.values()].at(-1)!;
      const pay = await fetch(checkout.checkout_url, { method: 'POST', redirect: 'manual' });
      assert.equal(pay.status, 303);
      assert.equal(await credits(bob), before);
      const pages = await Promise.all([1, 2, 3].map(() => fetch(`${gw.url}/v1/payment/redirect/success?payment_id=${r.body.payment_id}`).then((x) => x.text())));
      assert.ok(pages.every((t) => /credits were added/.test(t)));
      assert.equal(await credits(bob), before + 5_000_000);
    } finally {
      creem.setWebhook(`${gw.url}/v1/payment/webhook/b`);
    }
  });
});

describe('isolation', () => {
  test('users see only their own payments; bureaus only their city; admins all', async () => {
    const a = (await alice.get('/v1/payment/payments/me?limit=200')).body.items;
    const b = (await bob.get('/v1/payment/payments/me?limit=200')).body.items;
    assert.ok(a.length > 0 && b.length > 0);
    assert.ok(a.every((p: { city_id: string; user_id: string }) => p.city_id === 'pay-a' && p.user_id === 'alice'));
    assert.ok(b.every((p: { city_id: string; user_id: string }) => p.city_id === 'pay-b' && p.user_id === 'bob'));
    assert.equal((await alice.get('/v1/payment/payments/me?city_id=pay-b')).status, 403);
    assert.equal((await alice.get('/v1/payment/payments')).status, 403);
    const bureau = client(gw.url, (await admin.post('/v1/bureaus/create', { city_id: 'pay-b', name: 'b' })).body.bureau_token);
    const seen = (await bureau.get('/v1/payment/payments?limit=200')).body.items;
    assert.equal(seen.length, b.length);
    assert.equal((await bureau.get('/v1/payment/payments?city_id=pay-a')).status, 403);
    const all = await admin.get('/v1/payment/payments?limit=2');
    assert.equal(all.body.items.length, 2);
    const next = await admin.get(`/v1/payment/payments?limit=200&cursor=${all.body.next_cursor}`);
    assert.equal(all.body.items.length + next.body.items.length, a.length + b.length);
    assert.equal((await call(gw.url, 'POST', '/v1/payment/checkout', { body: { method: 'a', credits: 1_000_000 } })).status, 401);
  });
});
