// Issue 15 on the edge: the stock Worker in workerd (Miniflare) on a local D1, with a second
// isolate on the same D1. Rate limits (requests and tokens) hold across both isolates; revocation reaches both
// within 3 s, and so does a user API key's revocation; secrets are sealed in D1 and a wrong master key refuses to serve; a user budget
// refuses before the upstream; a Stripe refund delivered 5 times debits once.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, client, errorOf, type Res } from '../helpers/http.ts';
import { sleep, until } from '../helpers/wait.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { startStripeStub, type StripeStub } from '../stubs/stripe.ts';

const STRIPE_WHSEC = 'whsec_citygate_edge_security';

let stub: OpenAIStub;
let stripe: StripeStub;
let w: TestWorker;
let admin: ReturnType<typeof client>;

before(async () => {
  stub = await startOpenAIStub();
  stripe = await startStripeStub({ webhookSecret: STRIPE_WHSEC });
  w = await startWorker({
    secondIsolate: true,
    vars: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model',
      PAYMENT_A_SECRET_KEY: stripe.apiKey,
      PAYMENT_A_API_BASE: stripe.origin,
      RATE_LIMIT_USER_RPM: '5',
      LOCAL_LOGIN: 'true',
    },
  });
  assert.equal((await call(w.url, 'GET', '/health')).status, 200, w.logs());
  admin = client(w.url, await w.adminKey());
  // The webhook secret goes through the API, as an operator sets it (sealed in D1).
  assert.equal((await admin.post('/v1/env/upsert', { key: 'PAYMENT_A_WEBHOOK_SECRET', value: STRIPE_WHSEC })).status, 200);
  stripe.setWebhook(`${w.url}/v1/payment/webhook/a`);
});
after(async () => {
  await w?.stop();
  await stub?.close();
  await stripe?.close();
});

/** A request to one of the two isolates. */
async function at(isolate: 0 | 1, method: string, path: string, opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Res> {
  if (isolate === 0) return call(w.url, method, path, opts);
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await w.second(path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, body, text };
}

async function token(city: string, user: string): Promise<string> {
  const c = await admin.post('/v1/cities/create', { name: city, city_id: city });
  assert.ok(c.status === 200 || c.status === 409, c.text);
  const t = await admin.post('/v1/cities/tokens/apply', { city_id: city, user_id: user });
  assert.equal(t.status, 200, t.text);
  return t.body.user_token;
}
const chat = (isolate: 0 | 1, t: string) => at(isolate, 'POST', '/v1/ai/chat/completions', { token: t, body: { model: 'stub-model', max_tokens: 8, messages: [{ role: 'user', content: 'hi there' }] } });
const me = (isolate: 0 | 1, t: string) => at(isolate, 'GET', '/v1/accounts/me', { token: t });

async function freshWindow(needMs = 20_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < needMs) await sleep(left + 50);
}

describe('rate limits on D1, across two isolates', () => {
  test('RATE_LIMIT_USER_RPM=5: 8 calls over both isolates give 5 answers and 3 × 429 with Retry-After and x-ratelimit-*; another user is not limited', async () => {
    await freshWindow();
    const t = await token('edge-rl', 'alice');
    const r: Res[] = [];
    for (let i = 0; i < 8; i++) r.push(await chat((i % 2) as 0 | 1, t));
    assert.deepEqual(r.map((x) => x.status), [200, 200, 200, 200, 200, 429, 429, 429], r.map((x) => x.text).join('\n'));
    assert.deepEqual(r.slice(0, 5).map((x) => x.headers.get('x-ratelimit-remaining-requests')), ['4', '3', '2', '1', '0']);
    for (const x of r.slice(5)) {
      assert.equal(errorOf(x).code, 'rate_limited');
      assert.ok(Number(x.headers.get('retry-after')) >= 1);
      assert.equal(x.headers.get('x-ratelimit-limit-requests'), '5');
    }
    assert.equal((await chat(1, await token('edge-rl', 'bob'))).status, 200);
  });

  test('the guest limit per client address on local login', async () => {
    await freshWindow();
    await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_GUEST_RPM', value: '3' });
    await token('edge-guest', 'x');
    const login = (isolate: 0 | 1, ip: string) => at(isolate, 'POST', '/v1/accounts/login', { body: { city_id: 'edge-guest' }, headers: { 'cf-connecting-ip': ip } });
    await sleep(3500); // both isolates refresh their env snapshot (3 s)
    const r = [await login(0, '192.0.2.1'), await login(1, '192.0.2.1'), await login(0, '192.0.2.1'), await login(1, '192.0.2.1')];
    assert.deepEqual(r.map((x) => x.status), [200, 200, 200, 429]);
    assert.equal(errorOf(r[3]).code, 'rate_limited');
    assert.equal((await login(0, '192.0.2.2')).status, 200, 'another address is not limited');
    await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_GUEST_RPM', value: '0' });
  });

  test('a TPM limit counts the tokens each call used, on both isolates (each call writes its own: no timer outlives a request)', async () => {
    await freshWindow();
    await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_USER_TPM', value: '100' });
    await sleep(3500); // both isolates refresh their env snapshot (3 s)
    try {
      const t = await token('edge-tpm', 'carol');
      let used = 0;
      for (let i = 0; i < 4; i++) {
        const r = await chat((i % 2) as 0 | 1, t);
        assert.equal(r.status, 200, r.text);
        assert.equal(r.headers.get('x-ratelimit-remaining-tokens'), String(100 - used), 'remaining = limit − tokens used so far');
        used += r.body.usage.prompt_tokens + r.body.usage.completion_tokens;
        await sleep(150); // docs/security.md: another isolate counts them within 100 ms of their write
      }
    } finally {
      await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_USER_TPM', value: '0' });
    }
  });
});

describe('revocation on D1, across two isolates', () => {
  test('logout revokes one token; an admin revoke reaches both isolates within 3 s; a later token works; rotation keeps old tokens valid', async () => {
    const a1 = await token('edge-rev', 'carol');
    const a2 = await token('edge-rev', 'carol');
    for (const i of [0, 1] as const) for (const t of [a1, a2]) assert.equal((await me(i, t)).status, 200);
    assert.equal((await at(0, 'POST', '/v1/accounts/logout', { token: a1, body: {} })).status, 200);
    assert.equal((await me(0, a1)).status, 401);
    await until('the second isolate to refuse the logged-out token', async () => (await me(1, a1)).status === 401, 3000);
    assert.equal((await me(1, a2)).status, 200);

    const rv = await admin.post('/v1/cities/tokens/revoke', { city_id: 'edge-rev', user_id: 'carol' });
    assert.equal(rv.status, 200, rv.text);
    const t0 = Date.now();
    await until('both isolates to refuse carol', async () => (await me(0, a2)).status === 401 && (await me(1, a2)).status === 401, 6000);
    assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`);
    const fresh = await token('edge-rev', 'carol');
    for (const i of [0, 1] as const) assert.equal((await me(i, fresh)).status, 200);

    assert.equal((await admin.post('/v1/cities/keys/rotate', {})).status, 200);
    for (const i of [0, 1] as const) assert.equal((await me(i, fresh)).status, 200, 'a token of the old key still verifies');
    const newer = await token('edge-rev', 'carol');
    await until('the other isolate to verify a token of the new key', async () => (await me(1, newer)).status === 200, 5000);
    assert.equal((await call(w.url, 'GET', '/.well-known/jwks.json')).body.keys.length, 2);
  });
});

describe("users' API keys on D1, across two isolates", () => {
  test('make a key, call with it on both isolates (usage carries it, last_used_at written), revoke: both refuse within 3 s', async () => {
    const t = await token('edge-keys', 'dana');
    const made = await at(0, 'POST', '/v1/accounts/keys/create', { token: t, body: { name: 'edge agent', models: ['stub-model'] } });
    assert.equal(made.status, 200, made.text);
    const { id } = made.body.key;
    const key = made.body.secret as string;
    for (const i of [0, 1] as const) assert.equal((await chat(i, key)).status, 200, `isolate ${i}`);
    const other = await at(1, 'POST', '/v1/ai/chat/completions', { headers: { 'x-api-key': key }, body: { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] } });
    assert.equal(other.status, 404, 'the allow-list holds on the edge');
    await until('the usage records with the key', async () => (await w.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM usage WHERE key_id = ?`, id))[0].n >= 2, 10_000);
    await until('last_used_at', async () => (await w.sql<{ t: number | null }>(`SELECT last_used_at AS t FROM user_keys WHERE key_id = ?`, id))[0].t !== null, 10_000);
    const stored = await w.sql<{ h: string }>(`SELECT secret_hash AS h FROM user_keys WHERE key_id = ?`, id);
    assert.match(stored[0].h, /^[0-9a-f]{64}$/);
    assert.ok(!JSON.stringify(await w.sql(`SELECT * FROM user_keys`)).includes(key.slice(20)), 'only the hash is stored');

    const rv = await at(1, 'POST', '/v1/accounts/keys/revoke', { token: t, body: { id } });
    assert.equal(rv.status, 200, rv.text);
    const t0 = Date.now();
    await until('both isolates to refuse the revoked key', async () => (await me(0, key)).status === 401 && (await me(1, key)).status === 401, 6000);
    assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`);
    assert.equal(errorOf(await me(0, key)).code, 'key_revoked');
    assert.ok(!w.logs().includes(key.slice(20)), "the key is not in the Worker's logs");
  });
});

describe('secrets at rest on D1', () => {
  test('secret env values are sealed in D1, the admin key is readable by SQL; a wrong master key refuses to serve and changes nothing', async () => {
    await admin.post('/v1/env/upsert', { key: 'OAUTH_A_CLIENT_SECRET', value: 'gh-secret-edge-123456' });
    const rows = await w.sql<{ key: string; value: string }>(`SELECT key, value FROM env`);
    const dump = JSON.stringify(rows);
    assert.equal(dump.includes('gh-secret-edge-123456'), false);
    assert.equal(dump.includes(STRIPE_WHSEC), false);
    assert.match(rows.find((r) => r.key === 'OAUTH_A_CLIENT_SECRET')!.value, /^enc:v1:/);
    assert.match(rows.find((r) => r.key === 'GATEWAY_ADMIN_SECRET_KEY')!.value, /^cg_admin_/);
    const list = await admin.get('/v1/env/list?reveal=true');
    assert.equal(list.body.items.find((e: { key: string }) => e.key === 'OAUTH_A_CLIENT_SECRET').value, 'gh-secret-edge-123456');

    // An upstream's API key is sealed in D1 too, and still serves (its stub accepts only that key).
    const UPSTREAM_KEY = 'sk-edge-upstream-at-rest-9f8e7d6c';
    const keyed = await startOpenAIStub({ apiKey: UPSTREAM_KEY });
    try {
      const up = await admin.post('/v1/ai/upstreams/create', { name: 'edge-sealed', kind: 'openai-compatible', base_url: keyed.url, api_key: UPSTREAM_KEY, models: [{ id: 'edge-sealed', upstream_model: 'stub-model' }] });
      assert.equal(up.status, 200, up.text);
      assert.equal(up.body.key_last4, '7d6c');
      const [stored] = await w.sql<{ api_key: string }>(`SELECT api_key FROM ai_upstreams WHERE upstream_id = '${up.body.upstream_id}'`);
      assert.match(stored.api_key, /^enc:v1:/);
      assert.equal(JSON.stringify(await w.sql(`SELECT * FROM ai_upstreams`)).includes(UPSTREAM_KEY), false, 'the key is not in D1 in clear');
      const listed = await admin.get('/v1/ai/upstreams/list');
      assert.equal(listed.text.includes(UPSTREAM_KEY), false, 'the list never shows the key');
      for (const i of [0, 1] as const) {
        const r = await at(i, 'POST', '/v1/ai/chat/completions', { token: await w.adminKey(), body: { model: 'edge-sealed', messages: [{ role: 'user', content: 'hi' }] } });
        assert.equal(r.status, 200, `isolate ${i}: ${r.text}`);
      }
      assert.equal(keyed.requests.at(-1)?.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    } finally {
      await keyed.close();
    }
    const upstreamsBefore = JSON.stringify(await w.sql(`SELECT * FROM ai_upstreams`));

    // The same D1 under another master key.
    const wrong = await startWorker({ persistDir: w.persistDir, vars: { CITYGATE_MASTER_KEY: 'e'.repeat(64) } });
    try {
      const h = await call(wrong.url, 'GET', '/health');
      assert.equal(h.status, 503);
      assert.equal(errorOf(h).code, 'master_key_mismatch');
      assert.match(errorOf(h).message, /not the one this database's secrets are sealed with/);
      assert.equal((await call(wrong.url, 'GET', '/v1/env/list', { token: await w.adminKey() })).status, 503);
    } finally {
      await wrong.stop();
    }
    assert.equal(JSON.stringify(await w.sql(`SELECT key, value FROM env`)), dump, 'nothing changed');
    assert.equal(JSON.stringify(await w.sql(`SELECT * FROM ai_upstreams`)), upstreamsBefore, 'no upstream changed');
  });
});

describe('money on D1', () => {
  test('a user over the daily budget gets 402 budget_exceeded before the upstream is called', async () => {
    await admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-model': { per_request: 1000 } }) });
    await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_USER_RPM', value: '0' });
    const t = await token('edge-budget', 'dave');
    await admin.post('/v1/balance/adjust', { city_id: 'edge-budget', user_id: 'dave', credits: 100_000, reason: 'fund', idempotency_key: 'fund-dave' });
    assert.equal((await admin.post('/v1/cities/update', { city_id: 'edge-budget', user_budget: { credits: 2500, period: 'day' } })).status, 200);
    // Read back from D1 by a plain read.
    assert.deepEqual((await admin.get('/v1/cities/get?city_id=edge-budget')).body.user_budget, { credits: 2500, period: 'day' });
    await sleep(3500); // both isolates' env snapshots and city caches
    const calls = () => stub.requests.filter((r) => r.path === '/v1/chat/completions').length;
    assert.equal((await chat(0, t)).status, 200);
    assert.equal((await chat(1, t)).status, 200);
    const before = calls();
    const r = await chat(0, t);
    assert.equal(r.status, 402, r.text);
    assert.equal(errorOf(r).code, 'budget_exceeded');
    assert.equal(calls(), before, 'the upstream was not called');
    const b = (await at(1, 'GET', '/v1/balance/me', { token: t })).body;
    assert.deepEqual([b.budget.spent, b.budget.remaining], [2000, 500]);
  });

  test('a Stripe refund delivered 5 times (3 at once) debits once', async () => {
    const t = await token('edge-refund', 'erin');
    const u = client(w.url, t);
    const b0 = (await u.get('/v1/balance/me')).body.credits;
    assert.equal((await u.post('/v1/payment/checkout', { method: 'a', credits: 1_000_000 })).status, 200);
    const session = [...stripe.sessions.values()].at(-1)!.id;
    assert.equal(JSON.parse((await stripe.pay(session)).body).outcome, 'credited');
    const event = stripe.refundSession(session);
    const first = await stripe.deliverWebhook(event);
    const rest = await Promise.all([stripe.deliverWebhook(event), stripe.deliverWebhook(event), stripe.deliverWebhook(event)]);
    const last = await stripe.deliverWebhook(event);
    const outcomes = [first, ...rest, last].map((d) => JSON.parse(d.body).outcome);
    assert.deepEqual(outcomes.sort(), ['already_refunded', 'already_refunded', 'already_refunded', 'already_refunded', 'refunded']);
    assert.equal((await u.get('/v1/balance/me')).body.credits, b0);
  });
});
