// Rate limits across replicas on one PostgreSQL database (issue 15): with RATE_LIMIT_USER_RPM=5,
// two replicas — one of them itself two worker processes (GATEWAY_WORKERS=2) — never serve more
// than 5 calls of one user per window in total, whether the calls come all at once or one by one;
// every refusal is 429 rate_limited with Retry-After and x-ratelimit-*; another user is not limited.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startGateways, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { call, client, errorOf, type Res } from '../helpers/http.ts';
import { pgSkipReason } from '../helpers/postgres.ts';
import { freshWindow } from '../helpers/rate-window.ts';
import { startOpenAIStub } from '../stubs/openai.ts';

const skip = await pgSkipReason();

function assertLimited(r: Res) {
  assert.equal(r.status, 429, r.text);
  assert.equal(errorOf(r).code, 'rate_limited');
  const retry = Number(r.headers.get('retry-after'));
  assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
  assert.equal(r.headers.get('x-ratelimit-limit-requests'), '5');
  assert.equal(r.headers.get('x-ratelimit-remaining-requests'), '0');
  assert.match(r.headers.get('x-ratelimit-reset-requests') ?? '', /^\d+(ms|s)$/);
}

test('two replicas on one PostgreSQL database (one with 2 workers) never serve more than 5 per window in total', { skip, timeout: 180_000 }, async () => {
  const stub = await startOpenAIStub({ record: false });
  const dir = tempDir('citygate-rl-replicas-');
  const env = { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', RATE_LIMIT_USER_RPM: '5' };
  let gws: TestGateway[] = [];
  try {
    // Both on the one database of `dir`; the first boots alone, so the second finds it migrated.
    gws = await startGateways(1, { dir, postgres: true, env: { ...env, GATEWAY_WORKERS: '2' } });
    gws.push(...(await startGateways(1, { dir, postgres: true, env })));
    const [a, b] = gws;
    assert.ok(a.databaseUrl && a.databaseUrl === b.databaseUrl, 'one database');
    const admin = client(a.url, a.adminKey);
    assert.equal((await admin.post('/v1/cities/create', { name: 'rl', city_id: 'rl-pg' })).status, 200);
    const tokenOf = async (user: string) => (await admin.post('/v1/cities/tokens/apply', { city_id: 'rl-pg', user_id: user })).body.user_token as string;
    const [carol, dave] = [await tokenOf('carol'), await tokenOf('dave')];
    const chat = (url: string, t: string) => call(url, 'POST', '/v1/ai/chat/completions', { token: t, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });

    // Every call below in one fixed minute window (across a boundary the next window's 5 would
    // rightly be served): start with at least 40 s of the window left.
    await freshWindow(40_000);
    // 16 at once, alternating replicas (the 2-worker replica spreads its share over its workers).
    const burst = await Promise.all(Array.from({ length: 16 }, (_, i) => chat(i % 2 ? b.url : a.url, carol)));
    const served = burst.filter((r) => r.status === 200).length;
    assert.equal(served, 5, `served ${served} of 16 at once: ${burst.map((r) => r.status).join(',')}`);
    for (const r of burst.filter((r) => r.status !== 200)) assertLimited(r);
    // Then one by one on either replica: nothing more in this window.
    for (let i = 0; i < 6; i++) assertLimited(await chat(i % 2 ? a.url : b.url, carol));
    // Another user one by one over both replicas: exactly 5 of 8, in order.
    const seq: Res[] = [];
    for (let i = 0; i < 8; i++) seq.push(await chat(i % 2 ? b.url : a.url, dave));
    assert.deepEqual(seq.map((r) => r.status), [200, 200, 200, 200, 200, 429, 429, 429]);
    assert.deepEqual(seq.slice(0, 5).map((r) => r.headers.get('x-ratelimit-remaining-requests')), ['4', '3', '2', '1', '0']);
    for (const r of seq.slice(5)) assertLimited(r);
  } finally {
    await Promise.all(gws.map((g) => g.stop()));
    await stub.close();
  }
});
