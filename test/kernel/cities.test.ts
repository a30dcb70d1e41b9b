// Cities and the user tokens bound to them.
import assert from 'node:assert/strict';
import { sqlGet } from '../helpers/sql.ts';
import { after, before, describe, test } from 'node:test';
import { SignJWT, decodeJwt, decodeProtectedHeader, generateKeyPair, importJWK, jwtVerify, createLocalJWKSet } from 'jose';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';

let gw: TestGateway;
let admin: ReturnType<typeof client>;
before(async () => {
  gw = await startGateway();
  admin = client(gw.url, gw.adminKey);
});
after(() => gw?.stop());

const token = async (city_id: string, user_id = 'u1', extra: object = {}) => {
  const r = await admin.post('/v1/cities/tokens/apply', { city_id, user_id, ...extra });
  assert.equal(r.status, 200, r.text);
  return r.body.user_token as string;
};

describe('cities', () => {
  test('create with and without an id; list shows them; a taken id → 409', async () => {
    const a = await admin.post('/v1/cities/create', { name: 'Alpha', city_id: 'alpha' });
    assert.equal(a.status, 200);
    assert.equal(a.body.city_id, 'alpha');
    assert.equal(a.body.name, 'Alpha');
    assert.equal(a.body.status, 'active');
    assert.ok(!Number.isNaN(Date.parse(a.body.created_at)));
    assert.ok(!Number.isNaN(Date.parse(a.body.updated_at)));
    const gen = await admin.post('/v1/cities/create', { name: 'Generated' });
    assert.equal(gen.status, 200);
    assert.match(gen.body.city_id, /^city_[A-Za-z0-9_-]+$/);
    const list = await admin.get('/v1/cities/list');
    const ids = list.body.items.map((c: { city_id: string }) => c.city_id);
    assert.ok(ids.includes('alpha') && ids.includes(gen.body.city_id));
    const taken = await admin.post('/v1/cities/create', { name: 'Again', city_id: 'alpha' });
    assert.equal(taken.status, 409);
    assert.equal(errorOf(taken).code, 'city_exists');
    assert.equal((await admin.get('/v1/cities/list')).body.items.filter((c: { city_id: string }) => c.city_id === 'alpha').length, 1);
  });

  test('bad names and ids → 400', async () => {
    for (const body of [{}, { name: '' }, { name: '   ' }, { name: 'x', city_id: 'has space' }, { name: 'x', city_id: '-lead' }, { name: 'x', city_id: 'a'.repeat(65) }]) {
      const r = await admin.post('/v1/cities/create', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      errorOf(r);
    }
  });

  test('unknown city → 404 for every city action', async () => {
    for (const a of ['pause', 'activate', 'remove', 'tokens/apply']) {
      const r = await admin.post(`/v1/cities/${a}`, { city_id: 'ghost', user_id: 'u1' });
      assert.equal(r.status, 404, a);
      assert.equal(errorOf(r).code, 'city_not_found');
    }
  });

  test('pause → the token gets 403 city_paused and no new tokens (409); activate → works again', async () => {
    await admin.post('/v1/cities/create', { name: 'Beta', city_id: 'beta' });
    const t = await token('beta');
    const me = client(gw.url, t);
    assert.equal((await me.get('/v1/cities/current')).status, 200);
    const p = await admin.post('/v1/cities/pause', { city_id: 'beta' });
    assert.equal(p.status, 200);
    assert.equal(p.body.status, 'paused');
    const denied = await me.get('/v1/cities/current');
    assert.equal(denied.status, 403);
    assert.equal(errorOf(denied).code, 'city_paused');
    const noToken = await admin.post('/v1/cities/tokens/apply', { city_id: 'beta', user_id: 'u2' });
    assert.equal(noToken.status, 409);
    assert.equal((await admin.post('/v1/cities/activate', { city_id: 'beta' })).body.status, 'active');
    const ok = await me.get('/v1/cities/current');
    assert.equal(ok.status, 200);
    assert.equal(ok.body.city_id, 'beta');
  });

  test('remove → gone from list, its tokens get 401, its id can never be reused', async () => {
    await admin.post('/v1/cities/create', { name: 'Gamma', city_id: 'gamma' });
    const t = await token('gamma');
    assert.equal((await admin.post('/v1/cities/remove', { city_id: 'gamma' })).status, 200);
    assert.equal((await admin.get('/v1/cities/list')).body.items.some((c: { city_id: string }) => c.city_id === 'gamma'), false);
    const r = await client(gw.url, t).get('/v1/cities/current');
    assert.equal(r.status, 401);
    assert.equal((await admin.post('/v1/cities/create', { name: 'Gamma 2', city_id: 'gamma' })).status, 409);
    assert.equal((await admin.post('/v1/cities/activate', { city_id: 'gamma' })).status, 404, 'no coming back');
    assert.equal((await admin.post('/v1/cities/tokens/apply', { city_id: 'gamma', user_id: 'u1' })).status, 404);
  });
});

describe("reading a city's settings", () => {
  const NONE = { user_rpm: null, user_tpm: null, city_rpm: null, city_tpm: null, user_concurrency: null };
  before(async () => {
    await admin.post('/v1/cities/create', { name: 'Settings', city_id: 'set-a' });
    await admin.post('/v1/cities/create', { name: 'Neighbour', city_id: 'set-b' });
  });

  test('cities/get and list show the limits and budget update set, null once cleared; reading changes nothing', async () => {
    const fresh = await admin.get('/v1/cities/get?city_id=set-a');
    assert.equal(fresh.status, 200, fresh.text);
    assert.deepEqual([fresh.body.limits, fresh.body.user_budget], [NONE, null]);

    const up = await admin.post('/v1/cities/update', { city_id: 'set-a', limits: { user_rpm: 30, city_tpm: 0 }, user_budget: { credits: 5000, period: 'month' } });
    assert.equal(up.status, 200, up.text);
    const read = await admin.get('/v1/cities/get?city_id=set-a');
    assert.deepEqual(read.body, up.body, 'get answers exactly what update answered');
    assert.deepEqual(read.body.limits, { ...NONE, user_rpm: 30, city_tpm: 0 });
    assert.deepEqual(read.body.user_budget, { credits: 5000, period: 'month' });
    const listed = (await admin.get('/v1/cities/list')).body.items;
    assert.deepEqual(listed.find((c: { city_id: string }) => c.city_id === 'set-a'), up.body);
    assert.deepEqual(listed.find((c: { city_id: string }) => c.city_id === 'set-b').limits, NONE, 'another city keeps its own');
    // A read is a read: updated_at stays where the update put it.
    await new Promise((r) => setTimeout(r, 5));
    assert.equal((await admin.get('/v1/cities/get?city_id=set-a')).body.updated_at, up.body.updated_at);

    const cleared = await admin.post('/v1/cities/update', { city_id: 'set-a', limits: null, user_budget: null });
    assert.equal(cleared.status, 200, cleared.text);
    const after = await admin.get('/v1/cities/get?city_id=set-a');
    assert.deepEqual([after.body.limits, after.body.user_budget], [NONE, null]);
    assert.equal(after.body.name, 'Settings');
  });

  test('concurrent updates of different settings all land (none overwrites another with a stale copy)', async () => {
    await admin.post('/v1/cities/create', { name: 'Race', city_id: 'set-race' });
    const fields = ['user_rpm', 'user_tpm', 'city_rpm', 'city_tpm', 'user_concurrency'] as const;
    for (let round = 1; round <= 3; round++) {
      const rs = await Promise.all([
        ...fields.map((f) => admin.post('/v1/cities/update', { city_id: 'set-race', limits: { [f]: round * 10 } })),
        admin.post('/v1/cities/update', { city_id: 'set-race', user_budget: { credits: round * 100, period: 'day' } }),
      ]);
      for (const r of rs) assert.equal(r.status, 200, r.text);
      const read = (await admin.get('/v1/cities/get?city_id=set-race')).body;
      assert.deepEqual(read.limits, Object.fromEntries(fields.map((f) => [f, round * 10])), `round ${round}: every limit set`);
      assert.deepEqual(read.user_budget, { credits: round * 100, period: 'day' });
    }
  });

  test("a bureau reads its own city's settings, not another's (403); a user token gains nothing", async () => {
    await admin.post('/v1/cities/update', { city_id: 'set-b', limits: { user_concurrency: 3 }, user_budget: { credits: 70, period: 'day' } });
    const bureauOf = async (city_id: string) => client(gw.url, (await admin.post('/v1/bureaus/create', { city_id, name: `${city_id} backend` })).body.bureau_token);
    const b = await bureauOf('set-b');
    const own = await b.get('/v1/cities/get?city_id=set-b');
    assert.equal(own.status, 200, own.text);
    assert.deepEqual([own.body.limits.user_concurrency, own.body.user_budget], [3, { credits: 70, period: 'day' }]);
    const list = await b.get('/v1/cities/list');
    assert.deepEqual(list.body.items.map((c: { city_id: string }) => c.city_id), ['set-b']);
    assert.deepEqual(list.body.items[0], own.body);

    const other = await (await bureauOf('set-a')).get('/v1/cities/get?city_id=set-b');
    assert.equal(other.status, 403);
    assert.equal(errorOf(other).code, 'city_mismatch');
    assert.ok(!other.text.includes('"limits"') && !other.text.includes('70'), other.text);
    // A bureau still cannot change them.
    assert.equal((await b.post('/v1/cities/update', { city_id: 'set-b', limits: { user_rpm: 1 } })).status, 403);

    const user = client(gw.url, await token('set-b'));
    const get = await user.get('/v1/cities/get?city_id=set-b');
    assert.equal(get.status, 403);
    assert.equal((await user.get('/v1/cities/list')).status, 403);
    const current = await user.get('/v1/cities/current');
    assert.equal(current.status, 200);
    assert.deepEqual(Object.keys(current.body).sort(), ['city_id', 'created_at', 'name', 'status', 'updated_at']);
  });

  test('cities/get of an unknown or removed city → 404; a bad id → 400', async () => {
    assert.equal(errorOf(await admin.get('/v1/cities/get?city_id=ghost')).code, 'city_not_found');
    await admin.post('/v1/cities/create', { name: 'Gone', city_id: 'set-gone' });
    await admin.post('/v1/cities/remove', { city_id: 'set-gone' });
    assert.equal((await admin.get('/v1/cities/get?city_id=set-gone')).status, 404);
    const bad = await admin.get('/v1/cities/get?city_id=has%20space');
    assert.equal(bad.status, 400);
    assert.equal(errorOf(bad).param, 'city_id');
  });
});

describe('user tokens', () => {
  before(async () => {
    await admin.post('/v1/cities/create', { name: 'Tokens', city_id: 'tok' });
    await admin.post('/v1/cities/create', { name: 'Other', city_id: 'other' });
  });

  test('tokens/apply → an EdDSA JWT that verifies offline against the JWKS', async () => {
    const r = await admin.post('/v1/cities/tokens/apply', { city_id: 'tok', user_id: 'alice', metadata: { plan: 'pro' } });
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.body).sort(), ['city_id', 'expires_at', 'user_id', 'user_token']);
    assert.equal(r.body.city_id, 'tok');
    assert.equal(r.body.user_id, 'alice');
    const days = (Date.parse(r.body.expires_at) - Date.now()) / 86_400_000;
    assert.ok(days > 6.9 && days <= 7, `default ttl 7 days, got ${days}`);
    assert.equal(decodeProtectedHeader(r.body.user_token).alg, 'EdDSA');
    const jwks = createLocalJWKSet((await client(gw.url).get('/.well-known/jwks.json')).body);
    const { payload } = await jwtVerify(r.body.user_token, jwks);
    assert.equal(payload.sub, 'alice');
    assert.equal(payload.cid, 'tok');
  });

  test('ttl: custom within bounds, over 30 days → 400', async () => {
    const r = await admin.post('/v1/cities/tokens/apply', { city_id: 'tok', user_id: 'bob', ttl: 3600 });
    const secs = (Date.parse(r.body.expires_at) - Date.now()) / 1000;
    assert.ok(secs > 3590 && secs <= 3600);
    const max = await admin.post('/v1/cities/tokens/apply', { city_id: 'tok', user_id: 'bob', ttl: 30 * 86400 + 1 });
    assert.equal(max.status, 400);
    assert.equal(errorOf(max).param, 'ttl');
    for (const bad of [{ user_id: '' }, { user_id: 'has space' }, { ttl: 'long' }]) {
      assert.equal((await admin.post('/v1/cities/tokens/apply', { city_id: 'tok', user_id: 'bob', ...bad })).status, 400);
    }
  });

  test('seed §5.5: a city_id in the body or query that differs from the token’s city → 403', async () => {
    const t = client(gw.url, await token('tok'));
    const q = await t.get('/v1/cities/current?city_id=other');
    assert.equal(q.status, 403);
    assert.equal(errorOf(q).code, 'city_mismatch');
    assert.equal((await t.get('/v1/cities/current?city_id=tok')).status, 200);
    // A user token cannot reach admin actions at all, whatever city it names.
    const apply = await t.post('/v1/cities/tokens/apply', { city_id: 'other', user_id: 'x' });
    assert.equal(apply.status, 403);
  });

  test('expired, forged, unknown-key and garbage tokens → 401', async () => {
    const row = (await sqlGet<{ kid: string; private_jwk: string }>(gw, `SELECT kid, private_jwk FROM signing_keys WHERE status = 'active'`))!;
    const realKey = await importJWK(JSON.parse(row.private_jwk), 'EdDSA');
    const sign = (key: CryptoKey | Uint8Array, kid: string, exp: number) =>
      new SignJWT({ cid: 'tok' }).setProtectedHeader({ alg: 'EdDSA', kid }).setIssuer('citygate').setSubject('eve').setIssuedAt().setExpirationTime(exp).sign(key);
    const expired = await sign(realKey, row.kid, Math.floor(Date.now() / 1000) - 10);
    const r1 = await client(gw.url, expired).get('/v1/cities/current');
    assert.equal(r1.status, 401);
    assert.equal(errorOf(r1).code, 'token_expired');
    const other = (await generateKeyPair('EdDSA', { crv: 'Ed25519' })).privateKey;
    const future = Math.floor(Date.now() / 1000) + 3600;
    for (const t of [await sign(other, row.kid, future), await sign(other, 'unknown-kid', future), 'eyJnot.a.jwt', 'garbage']) {
      const r = await client(gw.url, t).get('/v1/cities/current');
      assert.equal(r.status, 401, t);
      errorOf(r);
    }
    // Tampered payload with the real signature.
    const good = await token('tok', 'mallory');
    const [h, , s] = good.split('.');
    const body = Buffer.from(JSON.stringify({ ...decodeJwt(good), cid: 'other' })).toString('base64url');
    assert.equal((await client(gw.url, `${h}.${body}.${s}`).get('/v1/cities/current')).status, 401);
  });
});
