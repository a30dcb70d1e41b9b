// Bureaus: a city's trusted backend, scoped to that city.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sqlAll } from '../helpers/sql.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';

let gw: TestGateway;
let admin: ReturnType<typeof client>;
let bureau: ReturnType<typeof client>;
let created: { bureau_id: string; bureau_token: string };
before(async () => {
  gw = await startGateway();
  admin = client(gw.url, gw.adminKey);
  await admin.post('/v1/cities/create', { name: 'Home', city_id: 'home' });
  await admin.post('/v1/cities/create', { name: 'Away', city_id: 'away' });
  created = (await admin.post('/v1/bureaus/create', { city_id: 'home', name: 'home backend' })).body;
  bureau = client(gw.url, created.bureau_token);
});
after(() => gw?.stop());

test('create shows the token once; only its hash is stored; list never shows it', async () => {
  assert.match(created.bureau_token, /^cg_bureau_/);
  assert.match(created.bureau_id, /^bur_/);
  const list = await admin.get('/v1/bureaus/list?city_id=home');
  assert.equal(list.status, 200);
  assert.equal(list.body.items.length, 1);
  assert.equal(list.body.items[0].status, 'active');
  assert.equal(JSON.stringify(list.body).includes(created.bureau_token), false);
  const dump = JSON.stringify(await sqlAll(gw, 'SELECT * FROM bureaus'));
  assert.equal(dump.includes(created.bureau_token), false);
  assert.equal((await admin.post('/v1/bureaus/create', { city_id: 'nowhere', name: 'x' })).status, 404);
});

test('a bureau lists only its city and issues tokens for it', async () => {
  const list = await bureau.get('/v1/cities/list');
  assert.equal(list.status, 200);
  assert.deepEqual(list.body.items.map((c: { city_id: string }) => c.city_id), ['home']);
  const t = await bureau.post('/v1/cities/tokens/apply', { city_id: 'home', user_id: 'u1' });
  assert.equal(t.status, 200);
  assert.equal(t.body.city_id, 'home');
  assert.equal((await client(gw.url, t.body.user_token).get('/v1/cities/current')).body.city_id, 'home');
});

test('a bureau cannot issue tokens for another city, read env, create cities or bureaus', async () => {
  const other = await bureau.post('/v1/cities/tokens/apply', { city_id: 'away', user_id: 'u1' });
  assert.equal(other.status, 403);
  assert.equal(errorOf(other).code, 'city_mismatch');
  for (const [m, path, body] of [
    ['GET', '/v1/env/list', undefined],
    ['POST', '/v1/env/upsert', { key: 'X', value: 'y' }],
    ['POST', '/v1/cities/create', { name: 'Mine' }],
    ['POST', '/v1/cities/pause', { city_id: 'home' }],
    ['POST', '/v1/bureaus/create', { city_id: 'home', name: 'another' }],
    ['GET', '/v1/bureaus/list', undefined],
  ] as const) {
    const r = m === 'GET' ? await bureau.get(path) : await bureau.post(path, body);
    assert.equal(r.status, 403, path);
    errorOf(r);
  }
  assert.equal((await admin.get('/v1/cities/list')).body.items.some((c: { name: string }) => c.name === 'Mine'), false);
});

test('revocation takes effect on the next request', async () => {
  const extra = (await admin.post('/v1/bureaus/create', { city_id: 'home', name: 'to revoke' })).body;
  const b = client(gw.url, extra.bureau_token);
  assert.equal((await b.get('/v1/cities/list')).status, 200);
  assert.equal((await admin.post('/v1/bureaus/revoke', { bureau_id: extra.bureau_id })).status, 200);
  const r = await b.get('/v1/cities/list');
  assert.equal(r.status, 401);
  errorOf(r);
  assert.equal((await admin.post('/v1/bureaus/revoke', { bureau_id: 'bur_missing' })).status, 404);
  assert.equal((await bureau.get('/v1/cities/list')).status, 200, 'the other bureau still works');
});
