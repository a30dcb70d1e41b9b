// Two gateway processes on one SQLite file (how a Node deployment scales out): an admin-key
// rotation and an env change made through one are seen by the other, without a restart,
// within the env cache bound (each process reloads the env table when its copy is older than
// 3 s; the allowance below adds room for a loaded machine, far under any missed refresh).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';

const CACHE_BOUND_MS = 3000;
const ALLOWANCE_MS = CACHE_BOUND_MS + 4000;

let a: TestGateway;
let b: TestGateway;
before(async () => {
  a = await startGateway();
  b = await startGateway({ dir: a.dir });
});
after(async () => {
  await b?.stop();
  await a?.stop();
});

/** Polls until `seen` holds on the other process; answers how long that took. */
async function seenWithin(what: string, seen: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  await until(what, seen, 30_000);
  const ms = Date.now() - t0;
  assert.ok(ms <= ALLOWANCE_MS, `${what}: took ${ms} ms (cache bound ${CACHE_BOUND_MS} ms)`);
  return ms;
}

test('an admin key rotated through one process stops and starts working on the other', async () => {
  const old = a.adminKey;
  // The other process has the old key loaded.
  assert.equal((await client(b.url, old).get('/v1/env/list')).status, 200);
  const next = 'cg_admin_rotated_elsewhere_0123456789ab';
  assert.equal((await client(a.url, old).post('/v1/env/upsert', { key: 'GATEWAY_ADMIN_SECRET_KEY', value: next })).status, 200);
  await seenWithin('the new key to work on the other process', async () => (await client(b.url, next).get('/v1/env/list')).status === 200);
  const refused = await client(b.url, old).get('/v1/env/list');
  assert.equal(refused.status, 401, 'the old key no longer works there');
  assert.equal(refused.body.error.code, 'invalid_token');
  a.adminKey = next;
  b.adminKey = next;
});

test('an env entry set and removed through one process takes and stops taking effect on the other', async () => {
  const preflight = (origin: string) =>
    fetch(`${b.url}/v1/cities/list`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } });
  assert.equal((await preflight('https://evil.example.com')).headers.get('access-control-allow-origin'), 'https://evil.example.com', 'any origin by default');
  const admin = client(a.url, a.adminKey);
  assert.equal((await admin.post('/v1/env/upsert', { key: 'CORS_ORIGINS', value: 'https://app.example.com' })).status, 200);
  await seenWithin('the allow-list to apply on the other process', async () => (await preflight('https://evil.example.com')).headers.get('access-control-allow-origin') === null);
  assert.equal((await preflight('https://app.example.com')).headers.get('access-control-allow-origin'), 'https://app.example.com');
  assert.equal((await admin.post('/v1/env/remove', { key: 'CORS_ORIGINS' })).status, 200);
  await seenWithin('the removal to apply on the other process', async () => (await preflight('https://evil.example.com')).headers.get('access-control-allow-origin') === 'https://evil.example.com');
  // And the other process lists what the first wrote.
  const listed = await call(b.url, 'GET', '/v1/env/list', { token: b.adminKey });
  assert.equal(listed.body.items.some((e: { key: string }) => e.key === 'CORS_ORIGINS'), false);
});
