// Plans through Creem subscriptions, black-box against the Creem stub (issue 34's "must show",
// the same flow as Stripe's): subscribe (a hosted checkout of the plan's recurring product),
// subscription.paid grants the period, the next one grants again, subscription.past_due and
// after the grace subscription_past_due, scheduled cancel then canceled → credits only, a
// refunded transaction takes its period back, replays grant nothing twice, a bad signature is
// refused. Event names as Creem's docs give them.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startAiWorld, tokenFor, type AiWorld } from '../ai/setup.ts';
import { call, client, errorOf } from '../helpers/http.ts';
import { signCreemPayload, startCreemStub, type CreemStub } from '../stubs/creem.ts';
import { rows, until, type Client } from './setup.ts';

const WHSEC = 'whsec_creem_plans_secret';
const CITY = 'plans-c';

let w: AiWorld;
let creem: CreemStub;
let admin: Client;
let planId: string;
before(async () => {
  creem = await startCreemStub({ webhookSecret: WHSEC, products: [{ id: 'prod_pro_monthly', price: 2000, currency: 'USD', billing_type: 'recurring', billing_period: 'every-month' }] });
  w = await startAiWorld({
    env: {
      MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 100 } }),
      USAGE_FLUSH_MS: '20',
      BALANCE_FLUSH_MS: '20',
      CITYGATE_TEST_HOOKS: '1',
      PAYMENT_B_API_KEY: creem.apiKey,
      PAYMENT_B_PRODUCT_ID: 'prod_pro_monthly',
      PAYMENT_B_WEBHOOK_SECRET: WHSEC,
      PAYMENT_B_API_BASE: creem.baseUrl,
    },
  });
  admin = w.admin;
  assert.equal((await admin.post('/v1/cities/create', { name: CITY, city_id: CITY })).status, 200);
  const p = await admin.post('/v1/plans/create', { city_id: CITY, name: 'Pro', interval: 'month', price: { amount: 2000, currency: 'usd' }, credits: 1000, windows: [{ window: '5h', limit: 800 }], overflow: false, creem_product_id: 'prod_pro_monthly' });
  assert.equal(p.status, 200, p.text);
  planId = p.body.plan.id;
});
after(async () => {
  await w?.close();
  await creem?.close();
});

const hook = (event: Record<string, unknown>, secret = WHSEC) => {
  const raw = JSON.stringify(event);
  return call(w.gw.url, 'POST', '/v1/plans/webhook/creem', { raw, headers: { 'content-type': 'application/json', 'creem-signature': signCreemPayload(raw, secret) } });
};
async function deliver(events: Record<string, unknown>[]): Promise<string[]> {
  const out: string[] = [];
  for (const e of events) {
    const r = await hook(e);
    assert.equal(r.status, 200, r.text);
    out.push(r.body.outcome);
  }
  return out;
}
const setClock = async (ms: number) => assert.equal((await admin.post('/v1/env/upsert', { key: 'TEST_CLOCK_OFFSET_MS', value: String(ms) })).status, 200);
const chat = (token: string) => call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
const periods = (subId: string) => rows<{ invoice_ref: string; revoked: number }>(w.gw, 'SELECT invoice_ref, revoked FROM subscription_periods WHERE subscription_id = ? ORDER BY period_start', [subId]);
const eventually = (f: () => Promise<boolean>, what: string) => until(f, 10_000, what);

let n = 0;
async function subscribed() {
  const user = `c${++n}`;
  const token = await tokenFor(admin, CITY, user);
  const c = client(w.gw.url, token);
  const s = await c.post('/v1/plans/subscribe', { plan_id: planId, method: 'creem' });
  assert.equal(s.status, 200, s.text);
  const checkoutId = /\/test\/checkout\/([^/?]+)/.exec(s.body.checkout_url)![1];
  const completed = creem.completeCheckout(checkoutId) as unknown as Record<string, unknown>;
  const events = [completed, ...creem.billing.start(checkoutId)];
  assert.deepEqual(await deliver(events), ['applied', 'applied', 'applied']);
  const creemSub = [...creem.billing.subscriptions.values()].find((x) => (x['metadata'] as Record<string, string>).subscription_id === s.body.subscription_id)!['id'] as string;
  return { user, token, c, subId: s.body.subscription_id as string, creemSub, events };
}

test('Creem: subscribe → subscription.paid grants; replays and a bad signature change nothing; the next period grants again; past due → refused after the grace → paid again', async () => {
  await setClock(0);
  const u = await subscribed();
  const me = (await u.c.get('/v1/plans/me')).body.subscription;
  assert.equal(me.provider, 'creem');
  assert.equal(me.status, 'active');
  await eventually(async () => (await chat(u.token)).status === 200, 'the plan serves');
  assert.deepEqual(await deliver(u.events), ['replayed', 'replayed', 'replayed']);
  assert.equal((await periods(u.subId)).length, 1);
  const forged = creem.billing.cancel(u.creemSub)[0]!;
  const bad = await hook(forged, 'whsec_wrong');
  assert.equal(bad.status, 400);
  assert.equal(errorOf(bad).code, 'invalid_signature');
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription.status, 'active');
  // the stub's subscription says canceled now; start a fresh one for the lifecycle
  const v = await subscribed();
  assert.deepEqual(await deliver(creem.billing.renew(v.creemSub)), ['applied']);
  assert.equal((await periods(v.subId)).length, 2, 'the next period granted');
  const end = Date.parse(creem.billing.subscriptions.get(v.creemSub)!['current_period_end_date'] as string) - Date.now();
  await setClock(end - 3600_000);
  assert.deepEqual(await deliver(creem.billing.renew(v.creemSub, { fail: true })), ['applied']);
  assert.equal((await v.c.get('/v1/plans/me')).body.subscription.status, 'past_due');
  await setClock(end + 3600_000);
  await eventually(async () => (await chat(v.token)).status === 200, 'served through the grace');
  await setClock(end + 72 * 3600_000);
  await eventually(async () => {
    const r = await chat(v.token);
    return r.status === 402 && errorOf(r).code === 'subscription_past_due';
  }, 'refused past the grace');
  assert.deepEqual(await deliver(creem.billing.recover(v.creemSub)), ['applied']);
  await eventually(async () => (await chat(v.token)).status === 200, 'served again once paid');
});

test('Creem: scheduled cancel, then canceled → credits only; a refunded transaction takes its period back', async () => {
  await setClock(0);
  const u = await subscribed();
  assert.deepEqual(await deliver(creem.billing.scheduleCancel(u.creemSub)), ['applied']);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription.cancel_at_period_end, true);
  assert.deepEqual(await deliver(creem.billing.cancel(u.creemSub)), ['applied']);
  assert.equal((await u.c.get('/v1/plans/me')).body.subscription, null);
  await eventually(async () => {
    const r = await chat(u.token);
    return r.status === 402 && errorOf(r).code === 'insufficient_credits';
  }, 'credits only');
  const v = await subscribed();
  assert.deepEqual(await deliver(creem.billing.refundLast(v.creemSub)), ['applied']);
  assert.equal(Number((await periods(v.subId))[0].revoked), 1);
  await eventually(async () => {
    const r = await chat(v.token);
    return r.status === 429 && errorOf(r).param === 'window:period';
  }, 'the refunded period allows nothing');
});
