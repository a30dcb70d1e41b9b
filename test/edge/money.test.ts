// balance, payment and usage on the edge: the stock Worker in workerd with a local D1, in front
// of the OpenAI and Stripe stubs. Black-box over HTTP: every number is read back through the
// gateway's own API (after the Worker's background usage flush), the way an operator would.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, client, errorOf } from '../helpers/http.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { startCreemStub, type CreemStub } from '../stubs/creem.ts';
import { startStripeStub, type StripeStub } from '../stubs/stripe.ts';
import { until } from '../helpers/wait.ts';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startMcpStub } from '../stubs/mcp-upstream.ts';

const STRIPE_WHSEC = 'whsec_citygate_edge';
const CREEM_WHSEC = 'creem_whsec_citygate_edge';
// A flat 1000 credits per call: the reservation equals the charge, so "covers N calls" is exact.
const PRICES = { 'stub-model': { per_request: 1000 }, 'stub-no-usage': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } };


type Client = ReturnType<typeof client>;

let stub: OpenAIStub;
let stripe: StripeStub;
let creem: CreemStub;
let w: TestWorker;
let admin: Client;

before(async () => {
  stub = await startOpenAIStub();
  stripe = await startStripeStub({ webhookSecret: STRIPE_WHSEC });
  creem = await startCreemStub({ webhookSecret: CREEM_WHSEC, products: [{ id: 'prod_credits', price: 500, currency: 'USD', name: '5 USD of credits' }] });
  w = await startWorker({
    vars: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model,stub-no-usage',
      MODEL_PRICES: JSON.stringify(PRICES),
      PAYMENT_A_SECRET_KEY: stripe.apiKey,
      PAYMENT_A_WEBHOOK_SECRET: STRIPE_WHSEC,
      PAYMENT_A_API_BASE: stripe.origin,
      PAYMENT_B_API_KEY: creem.apiKey,
      PAYMENT_B_PRODUCT_ID: 'prod_credits',
      PAYMENT_B_WEBHOOK_SECRET: CREEM_WHSEC,
      PAYMENT_B_API_BASE: creem.baseUrl,
      // On Node records would wait up to a minute for their batch (or a graceful stop). A Worker
      // never stops, so it writes them right after each request whatever this says.
      USAGE_FLUSH_MS: '60000',
    },
  });
  assert.equal((await call(w.url, 'GET', '/health')).status, 200, w.logs());
  admin = client(w.url, await w.adminKey());
  stripe.setWebhook(`${w.url}/v1/payment/webhook/a`);
});
after(async () => {
  await w?.stop();
  await stub?.close();
  await stripe?.close();
  await creem?.close();
});

let n = 0;
async function user(city: string, credits = 0): Promise<{ id: string; token: string; c: Client }> {
  const id = `u${++n}`;
  const created = await admin.post('/v1/cities/create', { name: city, city_id: city });
  assert.ok(created.status === 200 || created.status === 409, created.text);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: city, user_id: id })).body.user_token as string;
  if (credits) {
    const r = await admin.post('/v1/balance/adjust', { city_id: city, user_id: id, credits, reason: 'fund', idempotency_key: `fund-${id}` });
    assert.equal(r.status, 200, r.text);
  }
  return { id, token, c: client(w.url, token) };
}

const chat = (token: string, i = 0) =>
  call(w.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: `call ${i}` }] } });
const upstreamChats = () => stub.requests.filter((r) => r.path === '/v1/chat/completions').length;

/** Balance, ledger sum and usage of a user, read through the HTTP API. */
async function books(city: string, userId: string) {
  const balance = (await admin.get(`/v1/balance/list?city_id=${city}&limit=200`)).body.items.find((b: { user_id: string }) => b.user_id === userId)?.credits;
  const ledger = (await admin.get(`/v1/balance/ledger?city_id=${city}&user_id=${userId}&limit=200`)).body.items as { credits: number; kind: string }[];
  const usage = (await admin.get(`/v1/usage/list?city_id=${city}&user_id=${userId}&limit=200`)).body.items as { credits: number; status: string }[];
  return {
    balance: balance as number,
    ledgerSum: ledger.reduce((s, e) => s + e.credits, 0),
    ledger,
    usage,
    usageCredits: usage.reduce((s, u) => s + u.credits, 0),
  };
}

describe('balance, payment and usage in workerd on D1', () => {
  test('a priced chat/completions call is charged exactly once; its usage record arrives after the response', async () => {
    const u = await user('edge-pay', 5000);
    const r = await chat(u.token);
    assert.equal(r.status, 200, r.text);
    const b = await until('usage flushed by the background flush', async () => {
      const x = await books('edge-pay', u.id);
      return x.usage.length === 1 ? x : null;
    });
    assert.equal(b.balance, 4000);
    assert.equal(b.ledgerSum, 4000, 'balance = sum of ledger');
    assert.deepEqual(b.ledger.map((e) => e.kind).sort(), ['adjust', 'hold', 'settle']);
    assert.equal(b.usageCredits, 1000, 'usage credits = what the ledger charged');
    assert.equal(b.usage[0].status, 'ok');
    assert.equal((await u.c.get('/v1/balance/me')).body.credits, 4000);
    assert.equal((await u.c.get('/v1/usage/me')).body.items.length, 1);
  });

  test('a streamed call is charged once, after its last chunk', async () => {
    const u = await user('edge-pay', 2000);
    const s = await call(w.url, 'POST', '/v1/ai/chat/completions', {
      token: u.token,
      body: { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'one two' }] },
    });
    assert.equal(s.status, 200, s.text);
    assert.match(s.text, /data: \[DONE\]/);
    const b = await until('the streamed call\'s usage', async () => {
      const x = await books('edge-pay', u.id);
      return x.usage.length === 1 ? x : null;
    });
    assert.equal(b.balance, 1000);
    assert.equal(b.ledgerSum, 1000);
    assert.equal(b.usageCredits, 1000);
  });

  test('concurrent calls from a user who can afford exactly 5: ≤ 5 reach the upstream, the rest 402, never below zero', async () => {
    const u = await user('edge-race', 5000);
    const before = upstreamChats();
    const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(u.token, i)));
    const ok = rs.filter((r) => r.status === 200).length;
    const refused = rs.filter((r) => r.status === 402);
    assert.equal(ok + refused.length, 20, rs.map((r) => `${r.status} ${r.status >= 500 ? r.text : ''}`).join(','));
    assert.equal(upstreamChats() - before, ok, 'every 200 and nothing else reached the upstream');
    assert.equal(ok, 5);
    for (const r of refused) assert.equal(errorOf(r).code, 'insufficient_credits');
    const b = await until('20 usage records', async () => {
      const x = await books('edge-race', u.id);
      return x.usage.length === 20 ? x : null;
    });
    assert.equal(b.balance, 0);
    assert.equal(b.ledgerSum, 0);
    assert.equal(b.usageCredits, 5000);
    assert.equal(b.usage.filter((x) => x.status === 'ok').length, 5);
  });

  test('short of credits → 402 insufficient_credits and no upstream call', async () => {
    const u = await user('edge-pay', 999);
    const before = upstreamChats();
    const r = await chat(u.token);
    assert.equal(r.status, 402, r.text);
    assert.equal(errorOf(r).code, 'insufficient_credits');
    assert.equal(upstreamChats(), before);
    assert.equal((await u.c.get('/v1/balance/me')).body.credits, 999);
  });

  test('balance/adjust with the same idempotency key (twice, then three at once) changes the balance once', async () => {
    const u = await user('edge-adj');
    const body = { city_id: 'edge-adj', user_id: u.id, credits: 700, reason: 'gift', idempotency_key: 'gift-1' };
    const first = await admin.post('/v1/balance/adjust', body);
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.replayed, false);
    const second = await admin.post('/v1/balance/adjust', body);
    assert.equal(second.status, 200, second.text);
    assert.equal(second.body.replayed, true);
    assert.equal(second.body.entry.entry_id, first.body.entry.entry_id);
    const burst = await Promise.all([1, 2, 3].map(() => admin.post('/v1/balance/adjust', { ...body, idempotency_key: 'gift-2' })));
    assert.deepEqual(burst.map((r) => r.status), [200, 200, 200], burst.map((r) => r.text).join('\n'));
    assert.equal(burst.filter((r) => !r.body.replayed).length, 1);
    const reused = await admin.post('/v1/balance/adjust', { ...body, credits: 5 });
    assert.equal(reused.status, 409);
    assert.equal(errorOf(reused).code, 'idempotency_key_reused');
    const overdraw = await admin.post('/v1/balance/adjust', { ...body, credits: -10_000, idempotency_key: 'take' });
    assert.equal(overdraw.status, 409);
    assert.equal(errorOf(overdraw).code, 'insufficient_credits');
    const b = await books('edge-adj', u.id);
    assert.equal(b.balance, 1400);
    assert.equal(b.ledgerSum, 1400);
  });

  test('D1 keeps the ledger append-only and balances non-negative (triggers, CHECK)', async () => {
    const u = await user('edge-guard', 100);
    await assert.rejects(w.sql(`UPDATE ledger SET credits = 1000000 WHERE user_id = ?`, u.id), /append-only/);
    await assert.rejects(w.sql(`DELETE FROM ledger WHERE user_id = ?`, u.id), /append-only/);
    await assert.rejects(w.sql(`UPDATE balances SET credits = -1 WHERE user_id = ?`, u.id), /CHECK constraint failed/);
    assert.equal((await u.c.get('/v1/balance/me')).body.credits, 100);
  });

  test('a signed Stripe checkout.session.completed delivered 5 times, 3 of them at once, credits once', async () => {
    const u = await user('edge-stripe');
    const r = await u.c.post('/v1/payment/checkout', { method: 'a', credits: 1_000_000 });
    assert.equal(r.status, 200, r.text);
    assert.ok(r.body.checkout_url.startsWith(stripe.origin), r.body.checkout_url);
    const session = [...stripe.sessions.values()].find((s) => s.metadata.payment_id === r.body.payment_id)!;
    const event = stripe.completeSession(session.id);
    const first = await stripe.deliverWebhook(event);
    assert.equal(first.status, 200, first.body);
    assert.equal(JSON.parse(first.body).outcome, 'credited');
    const rest = [...(await Promise.all([1, 2, 3].map(() => stripe.deliverWebhook(event)))), await stripe.deliverWebhook(event)];
    for (const d of rest) {
      assert.equal(d.status, 200, d.body);
      assert.equal(JSON.parse(d.body).outcome, 'already_paid');
    }
    const bad = await stripe.deliverWebhook(event, { secret: 'whsec_not_ours' });
    assert.equal(bad.status, 400);
    assert.equal((await u.c.get('/v1/balance/me')).body.credits, 1_000_000);
    const p = (await u.c.get('/v1/payment/payments/me')).body.items.find((x: { payment_id: string }) => x.payment_id === r.body.payment_id);
    assert.equal(p.status, 'paid');
    const b = await books('edge-stripe', u.id);
    assert.deepEqual(b.ledger.map((e) => e.kind), ['topup']);
    assert.equal(b.ledgerSum, b.balance);
    const ev = await w.sql<{ deliveries: number }>(`SELECT deliveries FROM payment_events WHERE event_id = ?`, event.id);
    assert.equal(ev[0]?.deliveries, 5);
  });

  test('usage: summary per day × city × model; records and balances survive a restart of the Worker', async () => {
    const u = await user('edge-keep', 3000);
    for (let i = 0; i < 3; i++) assert.equal((await chat(u.token, i)).status, 200);
    // Written in the background of each request (no stop(), no minute-long batch timer) …
    await until(
      'the records in D1',
      async () => (await w.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM usage WHERE city_id = 'edge-keep'`))[0].n === 3,
    );
    // … so an isolate that goes away now loses nothing.
    w = await w.restart();
    admin = client(w.url, await w.adminKey());
    const b = await until('usage after the restart', async () => {
      const x = await books('edge-keep', u.id);
      return x.usage.length === 3 ? x : null;
    });
    assert.equal(b.balance, 0);
    assert.equal(b.ledgerSum, 0);
    assert.equal(b.usageCredits, 3000);
    const s = await admin.get('/v1/usage/summary?city_id=edge-keep');
    assert.equal(s.status, 200, s.text);
    assert.equal(s.body.totals.calls, 3);
    assert.equal(s.body.totals.credits, 3000);
    assert.deepEqual(s.body.items.map((x: { model: string }) => x.model), ['stub-model']);
  });

  test('an upstream that reports no usage: charged the documented estimate, the record marked estimated', async () => {
    const u = await user('edge-estimate', 20_000); // the hold: 8,192 output tokens × 2 + input
    const body = { model: 'stub-no-usage', messages: [{ role: 'user', content: 'one two' }] };
    const r = await u.c.post('/v1/ai/chat/completions', body);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.usage, undefined);
    // input ⌈request bytes / 4⌉ at 1 credit, output ⌈reply bytes / 4⌉ at 2 credits
    const input = Math.ceil(Buffer.byteLength(JSON.stringify(body)) / 4);
    const output = Math.ceil(Buffer.byteLength('Hello from stub: one two') / 4);
    const b = await until('the estimated record', async () => {
      const x = await books('edge-estimate', u.id);
      return x.usage.length === 1 ? x : null;
    }, 30_000);
    const rec = b.usage[0] as unknown as { estimated: boolean; input_tokens: number; output_tokens: number; credits: number };
    assert.deepEqual([rec.estimated, rec.input_tokens, rec.output_tokens, rec.credits], [true, input, output, input + 2 * output]);
    assert.equal(b.balance, 20_000 - input - 2 * output);
    assert.equal(b.ledgerSum, b.balance);
  });

  test('an underpaid Stripe checkout is credited only what was paid; the admin sees the shortfall', async () => {
    stripe.setWebhook(`${w.url}/v1/payment/webhook/a`); // the Worker may have been restarted on a new port
    const u = await user('edge-underpaid');
    const r = await u.c.post('/v1/payment/checkout', { method: 'a', credits: 2_000_000 });
    assert.equal(r.status, 200, r.text);
    const session = [...stripe.sessions.values()].find((s) => s.metadata.payment_id === r.body.payment_id)!;
    const d = await stripe.deliverWebhook(stripe.completeSession(session.id, {}, { discount: 50 }));
    assert.equal(d.status, 200, d.body);
    assert.equal(JSON.parse(d.body).outcome, 'credited');
    assert.equal((await u.c.get('/v1/balance/me')).body.credits, 1_500_000);
    const p = (await admin.get('/v1/payment/payments?city_id=edge-underpaid')).body.items.find((x: { payment_id: string }) => x.payment_id === r.body.payment_id);
    assert.deepEqual([p.status, p.amount, p.amount_paid, p.credited, p.shortfall], ['paid', 200, 150, 1_500_000, 50]);
  });
  test('an underpaid Creem checkout (discount code) is credited pro rata, once, as on Node; the admin sees the shortfall', async () => {
    creem.setWebhook(`${w.url}/v1/payment/webhook/b`); // the Worker may have been restarted on a new port
    const u = await user('edge-underpaid-b');
    const r = await u.c.post('/v1/payment/checkout', { method: 'b', credits: 5_000_000 });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual([r.body.units, r.body.amount], [1, 500]);
    const checkout = [...creem.checkouts.values()].at(-1)!;
    const event = creem.completeCheckout(checkout.id, {}, { discount: 100 }); // 4.00 of 5.00 paid
    const d = await creem.deliverWebhook(event);
    assert.equal(d.status, 200, d.body);
    assert.equal(JSON.parse(d.body).outcome, 'credited');
    assert.equal((await u.c.get('/v1/balance/me')).body.credits, 4_000_000, '⌊5,000,000 × 400 / 500⌋');
    const again = await creem.deliverWebhook(event);
    assert.equal(JSON.parse(again.body).outcome, 'already_paid');
    assert.equal((await u.c.get('/v1/balance/me')).body.credits, 4_000_000);
    const p = (await admin.get('/v1/payment/payments?city_id=edge-underpaid-b')).body.items.find((x: { payment_id: string }) => x.payment_id === r.body.payment_id);
    assert.deepEqual([p.status, p.credits, p.amount, p.amount_paid, p.credited, p.shortfall], ['paid', 5_000_000, 500, 400, 4_000_000, 100]);
    const b = await books('edge-underpaid-b', u.id);
    assert.deepEqual(b.ledger.map((e) => [e.kind, e.credits]), [['topup', 4_000_000]]);
    assert.equal(b.ledgerSum, b.balance);
  });
});

describe('the MCP gateway in workerd on D1 (stateless: every request connects its upstream afresh)', () => {
  test('/v1/mcp: the SDK client lists a city\'s tools and calls them; a race for credits for 3 calls serves 3, charged once each', async () => {
    const secret = 'edge-upstream-secret-0123456789';
    const up = await startMcpStub({ name: 'edge', secretHeader: ['x-key', secret], tools: [{ name: 'echo' }, { name: 'off' }] });
    try {
      const u = await user('edge-mcp', 3000);
      const refused = await admin.post('/v1/mcp/servers/create', { city_id: 'edge-mcp', name: 'tools', url: up.url });
      assert.equal(refused.status, 400, refused.text);
      assert.equal(errorOf(refused).param, 'url');
      assert.equal((await admin.post('/v1/env/upsert', { key: 'AI_FETCH_ALLOW_PRIVATE', value: 'true' })).status, 200);
      const s = await admin.post('/v1/mcp/servers/create', { city_id: 'edge-mcp', name: 'tools', url: up.url, auth: { type: 'headers', headers: { 'x-key': secret } }, allowed_tools: ['echo'], price: 1000 });
      assert.equal(s.status, 200, s.text);
      const t = await admin.post('/v1/mcp/servers/test', { server_id: s.body.server_id });
      assert.equal(t.body.ok, true, t.text);

      const transport = new StreamableHTTPClientTransport(new URL(`${w.url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${u.token}` } } });
      const c = new McpClient({ name: 'edge-test', version: '1.0.0' });
      await c.connect(transport);
      assert.deepEqual((await c.listTools()).tools.map((x) => x.name), ['tools__echo']);
      const rs = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => c.callTool({ name: 'tools__echo', arguments: { text: `e${i}` } })));
      await c.close();
      const ok = rs.filter((r) => r.status === 'fulfilled').length;
      for (const r of rs) if (r.status === 'rejected') assert.ok(r.reason instanceof McpError && r.reason.code === -32040, String(r.reason));
      assert.equal(ok, 3);
      assert.equal(up.calls.get('echo'), 3, 'the upstream saw exactly the paid calls');
      const b = await until('8 usage records', async () => {
        const x = await books('edge-mcp', u.id);
        return x.usage.length === 8 ? x : null;
      });
      assert.equal(b.balance, 0);
      assert.equal(b.ledgerSum, 0);
      assert.equal(b.usageCredits, 3000);
      assert.ok(!w.logs().includes(secret));
    } finally {
      await admin.post('/v1/env/remove', { key: 'AI_FETCH_ALLOW_PRIVATE' });
      await up.close();
    }
  });
});
