// Plans through Stripe Billing, black-box against the Stripe stub (issue 34's "must show"):
// subscribe (Checkout in subscription mode, the plan's price created through the API), the
// first invoice.paid grants the period, the next period's grants again, a failed payment makes
// the subscription past due and after the grace calls get subscription_past_due, cancel at the
// period's end and deletion fall back to credits only, a refunded invoice takes its period's
// credits back, every event replayed grants nothing twice, and a bad signature is refused.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startAiWorld, tokenFor, type AiWorld } from '../ai/setup.ts';
import { call, client, errorOf } from '../helpers/http.ts';
import { signStripePayload, startStripeStub, type StripeEvent, type StripeStub } from '../stubs/stripe.ts';
import { assertBooksBalance, row, rows, until, type Client } from './setup.ts';

const WHSEC = 'whsec_plans_test_secret';
const CITY = 'plans-s';
const PRICES = { 'stub-model': { per_request: 100 } };
const DAY = 86_400_000;

let w: AiWorld;
let stripe: StripeStub;
let admin: Client;
let planId: string;
before(async () => {
  stripe = await startStripeStub({ webhookSecret: WHSEC });
  w = await startAiWorld({
    env: {
      MODEL_PRICES: JSON.stringify(PRICES),
      USAGE_FLUSH_MS: '20',
      BALANCE_FLUSH_MS: '20',
      CITYGATE_TEST_HOOKS: '1',
      PAYMENT_A_SECRET_KEY: stripe.apiKey,
      PAYMENT_A_WEBHOOK_SECRET: WHSEC,
      PAYMENT_A_API_BASE: stripe.origin,
    },
  });
  admin = w.admin;
  assert.equal((await admin.post('/v1/cities/create', { name: CITY, city_id: CITY })).status, 200);
  const p = await admin.post('/v1/plans/create', { city_id: CITY, name: 'Pro', interval: 'month', price: { amount: 2000, currency: 'usd' }, credits: 1000, windows: [{ window: '5h', limit: 800 }], overflow: false });
  assert.equal(p.status, 200, p.text);
  planId = p.body.plan.id;
  const hookEp = await admin.post('/v1/webhooks/create', { city_id: CITY, url: 'https://hooks.invalid/citygate', events: ['subscription.created', 'subscription.renewed', 'subscription.past_due', 'subscription.canceled', 'subscription.ended', 'plan.window_exhausted'] });
  assert.equal(hookEp.status, 200, hookEp.text);
});
after(async () => {
  await w?.close();
  await stripe?.close();
});

const hook = (event: StripeEvent | Record<string, unknown>, sig?: string) => {
  const raw = JSON.stringify(event);
  return call(w.gw.url, 'POST', '/v1/plans/webhook/stripe', { raw, headers: { 'content-type': 'application/json', 'stripe-signature': sig ?? signStripePayload(raw, WHSEC) } });
};
async function deliver(events: (StripeEvent | Record<string, unknown>)[]): Promise<string[]> {
  const out: string[] = [];
  for (const e of events) {
    const r = await hook(e);
    assert.equal(r.status, 200, r.text);
    out.push(r.body.outcome);
  }
  return out;
}
async function setClock(ms: number) {
  assert.equal((await admin.post('/v1/env/upsert', { key: 'TEST_CLOCK_OFFSET_MS', value: String(ms) })).status, 200);
}
const chat = (token: string) => call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
const periods = (subId: string) => rows<{ invoice_ref: string; credits: number; revoked: number }>(w.gw, 'SELECT invoice_ref, credits, revoked FROM subscription_periods WHERE subscription_id = ? ORDER BY period_start', [subId]);
/** A fresh subscription's cache entry (SUB_CACHE_MS) is not waited for: every assertion polls what a call sees. */
const eventually = (f: () => Promise<boolean>, what: string) => until(f, 10_000, what);

let n = 0;
async function subscribed(): Promise<{ user: string; token: string; c: Client; subId: string; stripeSub: string; events: StripeEvent[] }> {
  const user = `p${++n}`;
  const token = await tokenFor(admin, CITY, user);
  const c = client(w.gw.url, token);
  const s = await c.post('/v1/plans/subscribe', { plan_id: planId });
  assert.equal(s.status, 200, s.text);
  const sessionId = /\/c\/pay\/([^/?]+)/.exec(s.body.checkout_url)![1];
  const session = stripe.getSession(sessionId)!;
  assert.equal(session.mode, 'subscription');
  const completed = stripe.completeSession(sessionId);
  const events = [completed, ...stripe.subscriptionEventsOf(sessionId)];
  assert.deepEqual(await deliver(events), ['applied', 'ignored', 'applied']); // subscription.created carries nothing to apply
  return { user, token, c, subId: s.body.subscription_id, stripeSub: stripe.getSession(sessionId)!['subscription'] as string, events };
}

test('subscribe → invoice.paid grants the period; calls draw on the plan; replays grant nothing twice; the next period grants again', async () => {
  await setClock(0);
  const u = await subscribed();
  assert.equal(stripe.requests.filter((r) => r.path === '/v1/prices' && r.method === 'POST').length, 1, "the plan's recurring price was created through the API");
  const me = await u.c.get('/v1/plans/me');
  assert.equal(me.body.subscription.status, 'active');
  assert.equal(me.body.subscription.provider, 'stripe');
  assert.equal(me.body.subscription.windows.find((x: { name: string }) => x.name === 'period').limit, 1000);
  await eventually(async () => (await chat(u.token)).status === 200, 'the plan serves');
  assert.equal((await u.c.get('/v1/balance/me')).body.credits, 0, 'no prepaid credits used');
  // Every event again, and all at once: nothing applies twice.
  assert.deepEqual(await deliver(u.events), ['replayed', 'replayed', 'replayed']);
  const dup = await Promise.all(u.events.map((e) => hook(e)));
  assert.ok(dup.every((r) => r.status === 200 && r.body.outcome === 'replayed'), dup.map((r) => r.text).join());
  assert.equal((await periods(u.subId)).length, 1);
  // The next period.
  const renewal = stripe.billing.renew(u.stripeSub) as unknown as StripeEvent[];
  assert.deepEqual(await deliver(renewal), ['applied']);
  assert.deepEqual(await deliver(renewal), ['replayed']);
  assert.equal((await periods(u.subId)).length, 2);
  await setClock(31 * DAY + 60_000); // inside the second period
  await eventually(async () => (await u.c.get('/v1/plans/me')).body.subscription.windows.find((x: { name: string }) => x.name === 'period').used === 0, 'a fresh period');
  assert.equal((await chat(u.token)).status, 200);
  // The new period's first take removed the buckets no window reads any more (the first period's).
  const p2 = await row<{ s: number }>(w.gw, 'SELECT MAX(period_start) AS s FROM subscription_periods WHERE subscription_id = ?', [u.subId]);
  const old = await row<{ n: number }>(w.gw, 'SELECT COUNT(*) AS n FROM window_buckets WHERE scope = ? AND minute < ?', [`sub:${u.subId}`, Math.floor(Number(p2.s) / 60_000)]);
  assert.equal(Number(old.n), 0, 'old buckets pruned');
  // A forged or stale event changes nothing.
  const forged = stripe.billing.delete(u.stripeSub)[0]!;
  const bad = await hook(forged, signStripePayload(JSON.stringify(forged), 'whsec_wrong'));
  assert.equal(bad.status, 400);
  assert.equal(errorOf(bad).code, 'invalid_signature');
  const stale = await hook(forged, signStripePayload(JSON.stringify(forged), WHSEC, Math.floor(Date.now() / 1000) - 3600));
  assert.equal(stale.status, 400);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription.status, 'active');
});

test('invoice.payment_failed: past due, still served through the grace, then 402 subscription_past_due; paid again serves again', async () => {
  await setClock(0);
  const u = await subscribed();
  const end = (stripe.billing.subscriptions.get(u.stripeSub)!['current_period_end'] as number) * 1000 - Date.now();
  await setClock(end - 3600_000); // the renewal fails an hour before the period ends
  assert.deepEqual(await deliver(stripe.billing.renew(u.stripeSub, { fail: true }) as unknown as StripeEvent[]), ['applied', 'applied']);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription.status, 'past_due');
  await setClock(end + 3600_000); // past the paid period, within the 72 h grace
  await eventually(async () => (await chat(u.token)).status === 200, 'served through the grace');
  await setClock(end + 72 * 3600_000); // past the grace
  await eventually(async () => {
    const r = await chat(u.token);
    return r.status === 402 && errorOf(r).code === 'subscription_past_due';
  }, 'refused past the grace');
  assert.deepEqual(await deliver(stripe.billing.payLatest(u.stripeSub) as unknown as StripeEvent[]), ['applied', 'applied']);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription.status, 'active');
  await eventually(async () => (await chat(u.token)).status === 200, 'served again once paid');
});

test('cancel at period end, then deleted: back to credits only; a refunded invoice takes its period back', async () => {
  await setClock(0);
  const u = await subscribed();
  assert.deepEqual(await deliver(stripe.billing.update(u.stripeSub, { cancelAtPeriodEnd: true }) as unknown as StripeEvent[]), ['applied']);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription.cancel_at_period_end, true);
  await eventually(async () => (await chat(u.token)).status === 200, 'still served until the end');
  assert.deepEqual(await deliver(stripe.billing.delete(u.stripeSub) as unknown as StripeEvent[]), ['applied']);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription, null);
  await eventually(async () => {
    const r = await chat(u.token);
    return r.status === 402 && errorOf(r).code === 'insufficient_credits';
  }, 'credits only (none)');
  assert.equal((await admin.post('/v1/balance/adjust', { city_id: CITY, user_id: u.user, credits: 300, reason: 'test', idempotency_key: `f-${u.user}` })).status, 200);
  assert.equal((await chat(u.token)).status, 200, 'charged to credits');
  await until(async () => (await u.c.get('/v1/balance/me')).body.credits === 200, 5000, 'charged 100');
  await assertBooksBalance(w.gw);

  const v = await subscribed();
  const invoice = stripe.billing.subscriptions.get(v.stripeSub)!['latest_invoice'] as string;
  assert.deepEqual(await deliver(stripe.billing.refundInvoice(invoice) as unknown as StripeEvent[]), ['applied']);
  assert.equal((await periods(v.subId))[0].revoked, 1);
  await eventually(async () => {
    const r = await chat(v.token);
    return r.status === 429 && errorOf(r).code === 'plan_window_exhausted' && errorOf(r).param === 'window:period';
  }, 'the refunded period allows nothing');
  // A dispute of a subscription invoice does the same (Stripe's dispute names the charge only).
  const x = await subscribed();
  const xInvoice = stripe.billing.subscriptions.get(x.stripeSub)!['latest_invoice'] as string;
  assert.deepEqual(await deliver(stripe.billing.disputeInvoice(xInvoice) as unknown as StripeEvent[]), ['applied']);
  assert.equal(Number((await periods(x.subId))[0].revoked), 1);
  const ev = await row<{ n: number }>(w.gw, "SELECT COUNT(*) AS n FROM subscription_events WHERE provider = 'stripe'");
  assert.ok(Number(ev.n) > 0);
});

test('upgrade through plans/change (Stripe prorates: the new plan from its invoice), cancel and resume through the API; the webhook events went out once each', async () => {
  await setClock(0);
  const big = await admin.post('/v1/plans/create', { city_id: CITY, name: 'Max', interval: 'month', price: { amount: 10000, currency: 'usd' }, credits: 5000, windows: [{ window: '5h', limit: 4000 }], overflow: false });
  assert.equal(big.status, 200, big.text);
  const u = await subscribed();
  const ch = await u.c.post('/v1/plans/change', { plan_id: big.body.plan.id });
  assert.equal(ch.status, 200, ch.text);
  const events = stripe.billing.drain() as unknown as StripeEvent[];
  assert.deepEqual(events.map((e) => e.type), ['customer.subscription.updated', 'invoice.paid']);
  assert.deepEqual(await deliver(events), ['applied', 'applied']);
  assert.deepEqual(await deliver(events), ['replayed', 'replayed']);
  const me = (await u.c.get('/v1/plans/me')).body.subscription;
  assert.equal(me.plan.id, big.body.plan.id);
  assert.equal(me.windows.find((x: { name: string }) => x.name === 'period').limit, 5000);
  assert.equal(me.windows.find((x: { name: string }) => x.name === '5h').limit, 4000);
  assert.equal((await periods(u.subId)).length, 2, 'the proration invoice granted the new plan once');

  assert.equal((await u.c.post('/v1/plans/cancel', {})).status, 200);
  assert.deepEqual(await deliver(stripe.billing.drain() as unknown as StripeEvent[]), ['applied']);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription.cancel_at_period_end, true);
  assert.equal((await u.c.post('/v1/plans/resume', {})).status, 200);
  assert.deepEqual(await deliver(stripe.billing.drain() as unknown as StripeEvent[]), ['applied']);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription.cancel_at_period_end, false);
  const portal = await u.c.post('/v1/plans/portal', {});
  assert.equal(portal.status, 200, portal.text);
  assert.match(portal.body.url, /\/p\/session\//);

  const types = await rows<{ type: string; n: number }>(w.gw, `SELECT type, COUNT(DISTINCT event_id) AS n FROM webhook_messages WHERE city_id = ? GROUP BY type`, [CITY]);
  const seen = Object.fromEntries(types.map((t) => [t.type, Number(t.n)]));
  for (const t of ['subscription.created', 'subscription.renewed', 'subscription.past_due', 'subscription.canceled', 'subscription.ended', 'plan.window_exhausted']) assert.ok(seen[t] >= 1, `${t}: ${JSON.stringify(seen)}`);
  assert.equal(seen['plan.window_exhausted'], 1, 'once per window, however many calls it refused');
  assert.equal(seen['subscription.created'], n, 'one per subscription, replays included');
});
