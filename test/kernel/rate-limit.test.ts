// Rate limits (issue 15), seen by clients: RATE_LIMIT_USER_RPM=5 gives 5 answers and 429s with
// Retry-After and OpenAI's x-ratelimit-* headers, also across two gateway processes on one
// database; other users are not limited; per-city overrides; the guest limit per client IP on
// local login (X-Forwarded-For only through TRUST_PROXY); webhooks exempt; a TPM limit counts
// the tokens the upstream reported (another process's within the documented 100 ms).
import assert from 'node:assert/strict';
import { sqlGet } from '../helpers/sql.ts';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client, errorOf, type Res } from '../helpers/http.ts';
import { freshWindow } from '../helpers/rate-window.ts';
import { sleep, until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

let stub: OpenAIStub;
let gw1: TestGateway;
let gw2: TestGateway;
let admin: ReturnType<typeof client>;

before(async () => {
  stub = await startOpenAIStub({ record: false });
  const env = { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', RATE_LIMIT_USER_RPM: '5', RATE_LIMIT_GUEST_RPM: '3' };
  gw1 = await startGateway({ env });
  gw2 = await startGateway({ dir: gw1.dir, env });
  admin = client(gw1.url, gw1.adminKey);
  for (const c of ['rl-a', 'rl-b', 'rl-c']) assert.equal((await admin.post('/v1/cities/create', { name: c, city_id: c })).status, 200);
});
after(async () => {
  await gw2?.stop();
  await gw1?.stop();
  await stub?.close();
});

async function token(city: string, user: string): Promise<string> {
  const r = await admin.post('/v1/cities/tokens/apply', { city_id: city, user_id: user });
  assert.equal(r.status, 200, r.text);
  return r.body.user_token;
}
const chat = (base: string, t: string, content = 'hello there') =>
  call(base, 'POST', '/v1/ai/chat/completions', { token: t, body: { model: 'stub-model', messages: [{ role: 'user', content }] } });


/** docs/security.md: another process's tokens count within 100 ms of their write (and a few ms for the read). */
const TOKEN_REFRESH_MS = 150;

function assertLimited(r: Res, limit: number) {
  assert.equal(r.status, 429, r.text);
  const e = errorOf(r);
  assert.equal(e.code, 'rate_limited');
  assert.equal(e.type, 'rate_limit_error');
  const retry = Number(r.headers.get('retry-after'));
  assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
  assert.equal(r.headers.get('x-ratelimit-limit-requests'), String(limit));
  assert.equal(r.headers.get('x-ratelimit-remaining-requests'), '0');
  assert.match(r.headers.get('x-ratelimit-reset-requests') ?? '', /^\d+(ms|s)$/);
}

test('RATE_LIMIT_USER_RPM=5: 8 calls give 5 answers and 3 × 429 with Retry-After and x-ratelimit-*; another user is not limited', async () => {
  await freshWindow();
  const alice = await token('rl-a', 'alice');
  const results: Res[] = [];
  for (let i = 0; i < 8; i++) results.push(await chat(gw1.url, alice));
  assert.deepEqual(results.map((r) => r.status), [200, 200, 200, 200, 200, 429, 429, 429]);
  // Served calls carry the headers too, counting down.
  assert.deepEqual(results.slice(0, 5).map((r) => r.headers.get('x-ratelimit-remaining-requests')), ['4', '3', '2', '1', '0']);
  assert.equal(results[0].headers.get('x-ratelimit-limit-requests'), '5');
  assert.match(results[0].headers.get('x-ratelimit-reset-requests') ?? '', /^\d+(ms|s)$/);
  for (const r of results.slice(5)) assertLimited(r, 5);
  // The other process shares the counter.
  assertLimited(await chat(gw2.url, alice), 5);
  // Another user (another city too) is not limited.
  const bob = await token('rl-a', 'bob');
  assert.equal((await chat(gw2.url, bob)).status, 200);
  // Reads (GET) are not counted against the user's limit.
  assert.equal((await call(gw1.url, 'GET', '/v1/ai/models', { token: alice })).status, 200);
});

test('two gateway processes on one database never serve more than 5 per window in total, even all at once', async () => {
  await freshWindow();
  const carol = await token('rl-b', 'carol');
  const all = await Promise.all(Array.from({ length: 16 }, (_, i) => chat(i % 2 ? gw2.url : gw1.url, carol)));
  const ok = all.filter((r) => r.status === 200).length;
  assert.equal(ok, 5, `served ${ok}: ${all.map((r) => r.status).join(',')}`);
  for (const r of all.filter((r) => r.status !== 200)) assertLimited(r, 5);
});

test('per-city limits from cities/update override the env keys (0 turns a limit off)', async () => {
  await freshWindow();
  const up = await admin.post('/v1/cities/update', { city_id: 'rl-c', limits: { user_rpm: 2 } });
  assert.equal(up.status, 200, up.text);
  assert.equal(up.body.limits.user_rpm, 2);
  assert.equal(up.body.limits.city_rpm, null);
  const dan = await token('rl-c', 'dan');
  const a = [await chat(gw1.url, dan), await chat(gw1.url, dan), await chat(gw1.url, dan)];
  assert.deepEqual(a.map((r) => r.status), [200, 200, 429]);
  assertLimited(a[2], 2);
  // The other process reads the new limit within its city cache's few seconds.
  await until('gw2 to apply the city limit', async () => (await chat(gw2.url, dan)).status === 429, 8000);

  assert.equal((await admin.post('/v1/cities/update', { city_id: 'rl-c', limits: { user_rpm: 0 } })).status, 200);
  const erin = await token('rl-c', 'erin');
  for (let i = 0; i < 7; i++) assert.equal((await chat(gw1.url, erin)).status, 200, 'limit off for this city');
  const bad = await admin.post('/v1/cities/update', { city_id: 'rl-c', limits: { user_rpm: -1 } });
  assert.equal(bad.status, 400);
  assert.equal(errorOf(bad).param, 'limits.user_rpm');
  assert.equal((await admin.post('/v1/cities/update', { city_id: 'rl-c', limits: { per_hour: 3 } })).status, 400);
  assert.equal((await call(gw1.url, 'POST', '/v1/cities/update', { token: erin, body: { city_id: 'rl-c', limits: { user_rpm: 100 } } })).status, 403);
  assert.equal((await admin.post('/v1/cities/update', { city_id: 'nowhere', limits: {} })).status, 404);
});

test('guest limit per client IP on local login; X-Forwarded-For counts only through TRUST_PROXY; webhooks are exempt', async () => {
  await freshWindow();
  const login = (base: string, xff?: string) =>
    call(base, 'POST', '/v1/accounts/login', { body: { city_id: 'rl-a' }, headers: xff ? { 'x-forwarded-for': xff } : {} });
  // A spoofed X-Forwarded-For does not give a fresh bucket: the socket address counts.
  const r = [await login(gw1.url, '10.0.0.1'), await login(gw2.url, '10.0.0.2'), await login(gw1.url, '10.0.0.3'), await login(gw2.url, '10.0.0.4')];
  assert.deepEqual(r.map((x) => x.status), [200, 200, 200, 429]);
  assertLimited(r[3], 3);
  assert.match(errorOf(r[3]).message, /client address/);
  // OAuth start and result share the per-IP limit.
  assert.equal((await call(gw1.url, 'GET', '/v1/accounts/oauth/result?state=x')).status, 429);
  // Webhooks are never limited (they answer for themselves: here 400/503, not 429).
  for (let i = 0; i < 5; i++) assert.notEqual((await call(gw1.url, 'POST', '/v1/payment/webhook/a', { raw: '{}' })).status, 429);
  // Behind one trusted proxy, the address before it is the client.
  await admin.post('/v1/env/upsert', { key: 'TRUST_PROXY', value: '1' });
  await until('gw2 to trust one proxy', async () => (await login(gw2.url, '198.51.100.7')).status === 200, 8000);
  const viaProxy = [await login(gw1.url, '198.51.100.8'), await login(gw1.url, '198.51.100.8'), await login(gw1.url, '198.51.100.8'), await login(gw1.url, '198.51.100.8')];
  assert.deepEqual(viaProxy.map((x) => x.status), [200, 200, 200, 429]);
  assert.equal((await login(gw1.url, '203.0.113.9, 198.51.100.8')).status, 429, 'only the hop before the trusted proxy counts');
  assert.equal((await login(gw1.url, '198.51.100.9')).status, 200, 'another client behind the proxy is not limited');
  await admin.post('/v1/env/remove', { key: 'TRUST_PROXY' });
});

test('a TPM limit counts the tokens the upstream reported', async () => {
  await freshWindow();
  await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_USER_TPM', value: '100' });
  await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_USER_RPM', value: '1000' });
  await sleep(3500); // both processes refresh their env snapshot (3 s)
  const counted = async (city: string, user: string) =>
    Number((await sqlGet<{ n: number }>(gw1, `SELECT n FROM rate_counters WHERE key = ?`, [`u:${city}\x1f${user}:tpm`]))?.n ?? -1);
  try {
    const frank = await token('rl-b', 'frank');
    let used = 0;
    for (let i = 0; i < 3; i++) {
      const r = await chat(i % 2 ? gw2.url : gw1.url, frank, 'two words');
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('x-ratelimit-limit-tokens'), '100');
      assert.equal(r.headers.get('x-ratelimit-remaining-tokens'), String(100 - used), 'remaining = limit − tokens used so far');
      used += r.body.usage.prompt_tokens + r.body.usage.completion_tokens;
      await until('the tokens to be counted', async () => (await counted('rl-b', 'frank')) === used);
      await sleep(TOKEN_REFRESH_MS); // the documented bound: then both processes count them
    }
    assert.ok(used < 100, `small calls used ${used} tokens`);
    // One long call spends the rest of the minute's tokens: the next one is refused.
    const big = await chat(gw1.url, frank, 'word '.repeat(120));
    assert.equal(big.status, 200, big.text);
    used += big.body.usage.prompt_tokens + big.body.usage.completion_tokens;
    await until('the big call to be counted', async () => (await counted('rl-b', 'frank')) === used);
    await sleep(TOKEN_REFRESH_MS);
    const refused = await chat(gw2.url, frank);
    assert.equal(refused.status, 429, refused.text);
    assert.equal(errorOf(refused).code, 'rate_limited');
    assert.match(errorOf(refused).message, /tokens per minute/);
    assert.equal(refused.headers.get('x-ratelimit-remaining-tokens'), '0');
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
  } finally {
    await admin.post('/v1/env/remove', { key: 'RATE_LIMIT_USER_TPM' });
  }
});

test('by default guests get 60 logins per minute per address (the headers say so)', async () => {
  const gw = await startGateway({ env: { RATE_LIMIT_GUEST_RPM: undefined } });
  try {
    await client(gw.url, gw.adminKey).post('/v1/cities/create', { name: 'd', city_id: 'dflt' });
    const first = await call(gw.url, 'POST', '/v1/accounts/login', { body: { city_id: 'dflt' } });
    const second = await call(gw.url, 'POST', '/v1/accounts/login', { body: { city_id: 'dflt' } });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.headers.get('x-ratelimit-limit-requests'), '60');
    // Two calls in one window count down (a window boundary between them would reset to 59).
    assert.ok(['58', '59'].includes(second.headers.get('x-ratelimit-remaining-requests') ?? ''));
  } finally {
    await gw.stop();
  }
});
