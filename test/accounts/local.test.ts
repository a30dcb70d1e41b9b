// The credential-free local login: on by default, off with LOCAL_LOGIN=false.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';

describe('accounts: local login (default: on)', () => {
  let gw: TestGateway;
  let admin: ReturnType<typeof client>;
  let guest: ReturnType<typeof client>;
  before(async () => {
    gw = await startGateway();
    admin = client(gw.url, gw.adminKey);
    guest = client(gw.url);
    await admin.post('/v1/cities/create', { name: 'Local', city_id: 'local-city' });
    await admin.post('/v1/cities/create', { name: 'Other', city_id: 'other-city' });
  });
  after(() => gw?.stop());

  test('providers lists local only when no OAuth provider is configured', async () => {
    const r = await guest.get('/v1/accounts/providers');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.items.map((p: { id: string }) => p.id), ['local']);
  });

  test('login answers a user token that works for its city; me shows the profile', async () => {
    const r = await guest.post('/v1/accounts/login', { city_id: 'local-city', name: 'Ann' });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(Object.keys(r.body).sort(), ['city_id', 'expires_at', 'user_id', 'user_token']);
    assert.equal(r.body.city_id, 'local-city');
    assert.match(r.body.user_id, /^usr_/);
    assert.ok(Date.parse(r.body.expires_at) > Date.now());
    assert.equal(r.headers.get('cache-control'), 'no-store');
    const me = client(gw.url, r.body.user_token);
    const current = await me.get('/v1/cities/current');
    assert.equal(current.status, 200);
    assert.equal(current.body.city_id, 'local-city');
    const profile = await me.get('/v1/accounts/me');
    assert.equal(profile.status, 200);
    assert.equal(profile.body.user_id, r.body.user_id);
    assert.equal(profile.body.name, 'Ann');
    assert.equal(profile.body.created_via, 'local');
    assert.deepEqual(profile.body.identities, []);
    // me needs a user token
    assert.equal((await guest.get('/v1/accounts/me')).status, 401);
    assert.equal((await admin.get('/v1/accounts/me')).status, 403);
  });

  test('a given user_id logs in as that user; the same id in another city is another user', async () => {
    const a = await guest.post('/v1/accounts/login', { city_id: 'local-city', user_id: 'dev-1' });
    const b = await guest.post('/v1/accounts/login', { city_id: 'local-city', user_id: 'dev-1', name: 'Dev One' });
    assert.equal(a.body.user_id, 'dev-1');
    assert.equal(b.body.user_id, 'dev-1');
    assert.equal((await client(gw.url, a.body.user_token).get('/v1/accounts/me')).body.name, 'Dev One');
    const other = await guest.post('/v1/accounts/login', { city_id: 'other-city', user_id: 'dev-1' });
    assert.equal(other.status, 200);
    assert.equal((await client(gw.url, other.body.user_token).get('/v1/accounts/me')).body.name, null);
    const listed = await admin.get('/v1/accounts/users?city_id=local-city');
    assert.equal(listed.body.items.filter((u: { user_id: string }) => u.user_id === 'dev-1').length, 1);
  });

  test('unknown city → 404, paused city → 403, bad input → 400', async () => {
    const nf = await guest.post('/v1/accounts/login', { city_id: 'ghost' });
    assert.equal(nf.status, 404);
    assert.equal(errorOf(nf).code, 'city_not_found');
    await admin.post('/v1/cities/create', { name: 'Paused', city_id: 'paused-city' });
    await admin.post('/v1/cities/pause', { city_id: 'paused-city' });
    const p = await guest.post('/v1/accounts/login', { city_id: 'paused-city' });
    assert.equal(p.status, 403);
    assert.equal(errorOf(p).code, 'city_paused');
    for (const body of [{}, { city_id: 'local-city', user_id: '' }, { city_id: 'local-city', user_id: 'has space' }, { city_id: 'local-city', name: 7 }]) {
      const r = await guest.post('/v1/accounts/login', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      errorOf(r);
    }
    assert.equal((await guest.get('/v1/accounts/login')).status, 405);
  });

  test('an OAuth provider that is not configured → 400 provider_not_configured', async () => {
    for (const provider of ['github', 'google']) {
      const r = await guest.post('/v1/accounts/oauth/start', { city_id: 'local-city', provider });
      assert.equal(r.status, 400);
      assert.equal(errorOf(r).code, 'provider_not_configured');
    }
  });

  test('a user who only received a token from cities/tokens/apply is listed by accounts/users', async () => {
    assert.equal((await admin.post('/v1/cities/tokens/apply', { city_id: 'other-city', user_id: 'backend-user' })).status, 200);
    assert.equal((await admin.post('/v1/cities/tokens/apply', { city_id: 'other-city', user_id: 'backend-user' })).status, 200);
    const r = await admin.get('/v1/accounts/users?city_id=other-city');
    const mine = r.body.items.filter((u: { user_id: string }) => u.user_id === 'backend-user');
    assert.equal(mine.length, 1);
    assert.equal(mine[0].created_via, 'token');
  });

  test('LOCAL_LOGIN=false in the env table switches it off at once', async () => {
    await admin.post('/v1/env/upsert', { key: 'LOCAL_LOGIN', value: 'false' });
    try {
      const r = await guest.post('/v1/accounts/login', { city_id: 'local-city' });
      assert.equal(r.status, 403);
      assert.equal(errorOf(r).code, 'local_login_disabled');
      assert.deepEqual((await guest.get('/v1/accounts/providers')).body.items, []);
    } finally {
      await admin.post('/v1/env/remove', { key: 'LOCAL_LOGIN' });
    }
    assert.equal((await guest.post('/v1/accounts/login', { city_id: 'local-city' })).status, 200);
  });
});

describe('accounts: LOCAL_LOGIN=false (the container default)', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ env: { LOCAL_LOGIN: 'false' } });
    await client(gw.url, gw.adminKey).post('/v1/cities/create', { name: 'C', city_id: 'c1' });
  });
  after(() => gw?.stop());

  test('login → 403 local_login_disabled and providers no longer lists local', async () => {
    const guest = client(gw.url);
    const r = await guest.post('/v1/accounts/login', { city_id: 'c1' });
    assert.equal(r.status, 403);
    assert.equal(errorOf(r).code, 'local_login_disabled');
    const unknownCity = await guest.post('/v1/accounts/login', { city_id: 'ghost' });
    assert.equal(unknownCity.status, 403, 'disabled comes first: no city probing');
    const p = await guest.get('/v1/accounts/providers');
    assert.equal(p.status, 200);
    assert.deepEqual(p.body.items, []);
    const health = await guest.get('/health');
    assert.ok(health.body.services.includes('accounts'));
  });
});
