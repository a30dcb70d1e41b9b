// Token revocation and key rotation (issue 15), across two gateway processes on one database:
// logout revokes one token; an admin (or the city's bureau) revokes every token of a user on
// every process within 3 s; a token issued afterwards works; after a key rotation old tokens
// keep verifying and both keys are in the JWKS.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';

let gw1: TestGateway;
let gw2: TestGateway;
let admin: ReturnType<typeof client>;

before(async () => {
  gw1 = await startGateway();
  gw2 = await startGateway({ dir: gw1.dir });
  admin = client(gw1.url, gw1.adminKey);
  assert.equal((await admin.post('/v1/cities/create', { name: 'Rev', city_id: 'rev' })).status, 200);
  assert.equal((await admin.post('/v1/cities/create', { name: 'Other', city_id: 'other' })).status, 200);
});
after(async () => {
  await gw2?.stop();
  await gw1?.stop();
});

async function token(user: string, base = gw1.url, key = gw1.adminKey): Promise<string> {
  const r = await call(base, 'POST', '/v1/cities/tokens/apply', { token: key, body: { city_id: 'rev', user_id: user } });
  assert.equal(r.status, 200, r.text);
  return r.body.user_token;
}
const me = (base: string, t: string) => call(base, 'GET', '/v1/accounts/me', { token: t });

test('logout revokes the calling token only, on every process', async () => {
  const a1 = await token('alice');
  const a2 = await token('alice');
  // Both processes have verified (and cached) both tokens.
  for (const g of [gw1, gw2]) for (const t of [a1, a2]) assert.equal((await me(g.url, t)).status, 200);

  const out = await call(gw1.url, 'POST', '/v1/accounts/logout', { token: a1, body: {} });
  assert.equal(out.status, 200, out.text);
  assert.equal(out.body.revoked, true);

  const r = await me(gw1.url, a1);
  assert.equal(r.status, 401);
  assert.equal(errorOf(r).code, 'token_revoked');
  const t0 = Date.now();
  await until('the other process to refuse the logged-out token', async () => (await me(gw2.url, a1)).status === 401, 5000);
  assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`);
  for (const g of [gw1, gw2]) assert.equal((await me(g.url, a2)).status, 200, 'the other token of the user still works');
  // A second logout with the revoked token is a 401, not a 500.
  assert.equal((await call(gw2.url, 'POST', '/v1/accounts/logout', { token: a1, body: {} })).status, 401);
});

test('an admin revoke refuses every token of the user on every process within 3 s; a token issued afterwards works', async () => {
  const b = [await token('bob'), await token('bob', gw2.url)];
  const carol = await token('carol');
  for (const g of [gw1, gw2]) for (const t of [...b, carol]) assert.equal((await me(g.url, t)).status, 200);

  const rv = await admin.post('/v1/cities/tokens/revoke', { city_id: 'rev', user_id: 'bob' });
  assert.equal(rv.status, 200, rv.text);
  const t0 = Date.now();
  await until(
    'every process to refuse every token of bob',
    async () => {
      for (const g of [gw1, gw2]) for (const t of b) if ((await me(g.url, t)).status !== 401) return false;
      return true;
    },
    6000,
  );
  const took = Date.now() - t0;
  assert.ok(took < 3000, `revocation took ${took} ms`);
  const r = await me(gw2.url, b[0]);
  assert.equal(errorOf(r).code, 'token_revoked');
  for (const g of [gw1, gw2]) assert.equal((await me(g.url, carol)).status, 200, 'another user is not affected');

  const fresh = await token('bob');
  for (const g of [gw1, gw2]) assert.equal((await me(g.url, fresh)).status, 200, 'a token issued after the revoke works');
});

test('a bureau revokes users of its own city only; users and guests cannot revoke', async () => {
  const bureau = (await admin.post('/v1/bureaus/create', { city_id: 'rev', name: 'backend' })).body.bureau_token as string;
  const dan = await token('dan');
  const own = await call(gw2.url, 'POST', '/v1/cities/tokens/revoke', { token: bureau, body: { city_id: 'rev', user_id: 'dan' } });
  assert.equal(own.status, 200, own.text);
  await until('dan refused', async () => (await me(gw1.url, dan)).status === 401, 5000);

  const away = await call(gw2.url, 'POST', '/v1/cities/tokens/revoke', { token: bureau, body: { city_id: 'other', user_id: 'dan' } });
  assert.equal(away.status, 403);
  const user = await call(gw1.url, 'POST', '/v1/cities/tokens/revoke', { token: await token('erin'), body: { city_id: 'rev', user_id: 'dan' } });
  assert.equal(user.status, 403);
  assert.equal((await call(gw1.url, 'POST', '/v1/cities/tokens/revoke', { body: { city_id: 'rev', user_id: 'dan' } })).status, 401);
  const bad = await admin.post('/v1/cities/tokens/revoke', { city_id: 'rev' });
  assert.equal(bad.status, 400);
  assert.equal(errorOf(bad).param, 'user_id');
  assert.equal((await admin.post('/v1/cities/tokens/revoke', { city_id: 'nowhere', user_id: 'x' })).status, 404);
});

test('after a key rotation old tokens still verify everywhere, the JWKS holds both keys, new tokens use the new key', async () => {
  const old = await token('frank');
  const kidOf = (t: string) => JSON.parse(Buffer.from(t.split('.')[0], 'base64url').toString()).kid as string;
  const before = (await call(gw1.url, 'GET', '/.well-known/jwks.json')).body.keys as { kid: string }[];
  assert.ok(before.some((k) => k.kid === kidOf(old)));

  const rot = await admin.post('/v1/cities/keys/rotate', {});
  assert.equal(rot.status, 200, rot.text);
  assert.notEqual(rot.body.kid, kidOf(old));
  assert.deepEqual(rot.body.retired, [kidOf(old)]);
  const userRot = await call(gw1.url, 'POST', '/v1/cities/keys/rotate', { token: old, body: {} });
  assert.equal(userRot.status, 403);

  const jwks = (await call(gw1.url, 'GET', '/.well-known/jwks.json')).body.keys as { kid: string }[];
  assert.deepEqual(new Set(jwks.map((k) => k.kid)), new Set([kidOf(old), rot.body.kid]));

  const fresh = await token('frank');
  assert.equal(kidOf(fresh), rot.body.kid);
  for (const g of [gw1, gw2]) assert.equal((await me(g.url, old)).status, 200, 'the old token still verifies');
  // The other process learns the new key as soon as it meets a token signed by it.
  await until('the other process to verify a token of the new key', async () => (await me(gw2.url, fresh)).status === 200, 5000);
  // and signs with it within a minute (here: it has not reloaded yet, so it may still use the old one; both verify).
  const fromGw2 = await token('frank', gw2.url);
  assert.equal((await me(gw1.url, fromGw2)).status, 200);
});
