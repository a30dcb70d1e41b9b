// The env service: the gateway's own runtime environment table, admin only.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';

let gw: TestGateway;
let admin: ReturnType<typeof client>;
before(async () => {
  gw = await startGateway();
  admin = client(gw.url, gw.adminKey);
});
after(() => gw?.stop());

const entry = async (key: string, reveal = true) =>
  (await admin.get(`/v1/env/list${reveal ? '?reveal=true' : ''}`)).body.items.find((e: { key: string }) => e.key === key);

test('upsert then list: secret-looking values masked unless reveal=true', async () => {
  assert.equal((await admin.post('/v1/env/upsert', { key: 'PAYMENT_A_SECRET_KEY', value: 'sk_test_abcdefghijklmnop' })).status, 200);
  assert.equal((await admin.post('/v1/env/upsert', { key: 'GATEWAY_CITY_BASE_URL', value: 'https://city.example.com' })).status, 200);
  const masked = await entry('PAYMENT_A_SECRET_KEY', false);
  assert.equal(masked.secret, true);
  assert.notEqual(masked.value, 'sk_test_abcdefghijklmnop');
  assert.equal(masked.value.includes('abcdefgh'), false);
  assert.equal((await entry('PAYMENT_A_SECRET_KEY')).value, 'sk_test_abcdefghijklmnop');
  const plain = await entry('GATEWAY_CITY_BASE_URL', false);
  assert.deepEqual(plain, { key: 'GATEWAY_CITY_BASE_URL', value: 'https://city.example.com', secret: false });
  for (const k of ['A_TOKEN', 'B_PASSWORD', 'C_SECRET']) {
    await admin.post('/v1/env/upsert', { key: k, value: 'hidden-value-0123456789' });
    assert.equal((await entry(k, false)).secret, true, k);
  }
  // upsert overwrites
  await admin.post('/v1/env/upsert', { key: 'GATEWAY_CITY_BASE_URL', value: 'https://other.example.com' });
  assert.equal((await entry('GATEWAY_CITY_BASE_URL')).value, 'https://other.example.com');
});

test('bad keys → 400 naming the field; nothing written', async () => {
  for (const key of ['lower', '1ABC', 'A-B', '', 'A B']) {
    const r = await admin.post('/v1/env/upsert', { key, value: 'x' });
    assert.equal(r.status, 400, key);
    assert.equal(errorOf(r).param, 'key');
  }
  const r = await admin.post('/v1/env/upsert', { key: 'OK_KEY' });
  assert.equal(r.status, 400);
  assert.equal(errorOf(r).param, 'value');
  assert.equal(await entry('OK_KEY'), undefined);
});

test('remove: 404 when absent; the admin key cannot be removed', async () => {
  await admin.post('/v1/env/upsert', { key: 'TO_REMOVE', value: '1' });
  const r = await admin.post('/v1/env/remove', { key: 'TO_REMOVE' });
  assert.equal(r.status, 200);
  assert.equal(await entry('TO_REMOVE'), undefined);
  const again = await admin.post('/v1/env/remove', { key: 'TO_REMOVE' });
  assert.equal(again.status, 404);
  assert.equal(errorOf(again).code, 'env_key_not_found');
  const adminKey = await admin.post('/v1/env/remove', { key: 'GATEWAY_ADMIN_SECRET_KEY' });
  assert.equal(adminKey.status, 400);
  assert.equal((await client(gw.url, gw.adminKey).get('/v1/env/list')).status, 200, 'admin key still works');
});

test('import: comments, export, quotes, escapes and multi-line values', async () => {
  const content = [
    '# a comment',
    '',
    'export IMP_PLAIN=hello world # trailing comment',
    "IMP_SINGLE='single $NOT_EXPANDED # kept'",
    'IMP_DOUBLE="line1\\nline2\\t\\"quoted\\""',
    'IMP_MULTI="first',
    'second',
    'third"',
    'IMP_EMPTY=',
    'IMP_EQ=a=b=c',
  ].join('\n');
  const r = await admin.post('/v1/env/import', { content });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, {
    imported: 6,
    keys: ['IMP_PLAIN', 'IMP_SINGLE', 'IMP_DOUBLE', 'IMP_MULTI', 'IMP_EMPTY', 'IMP_EQ'],
  });
  assert.equal((await entry('IMP_PLAIN')).value, 'hello world');
  assert.equal((await entry('IMP_SINGLE')).value, 'single $NOT_EXPANDED # kept');
  assert.equal((await entry('IMP_DOUBLE')).value, 'line1\nline2\t"quoted"');
  assert.equal((await entry('IMP_MULTI')).value, 'first\nsecond\nthird');
  assert.equal((await entry('IMP_EMPTY')).value, '');
  assert.equal((await entry('IMP_EQ')).value, 'a=b=c');
});

test('import is all or nothing: one bad line → 400 naming the line, nothing written', async () => {
  for (const [content, line] of [
    ['GOOD_ONE=1\nGOOD_TWO=2\nbad-key=3\n', 3],
    ['GOOD_ONE=1\nno equals sign here\n', 2],
    ['GOOD_ONE=1\nGOOD_TWO="unterminated\n', 2],
    ['GOOD_ONE=1\n\nGOOD_TWO=\'x\' junk', 3],
  ] as const) {
    const r = await admin.post('/v1/env/import', { content });
    assert.equal(r.status, 400, content);
    const e = errorOf(r);
    assert.equal(e.code, 'invalid_env_file');
    assert.match(e.message, new RegExp(`line ${line}\\b`));
    assert.equal(await entry('GOOD_ONE'), undefined, 'nothing written');
  }
});

test('only the admin: guests get 401, users and bureaus 403', async () => {
  await admin.post('/v1/cities/create', { name: 'Env city', city_id: 'env-city' });
  const user = (await admin.post('/v1/cities/tokens/apply', { city_id: 'env-city', user_id: 'u1' })).body.user_token;
  const bureau = (await admin.post('/v1/bureaus/create', { city_id: 'env-city', name: 'backend' })).body.bureau_token;
  assert.equal((await client(gw.url).get('/v1/env/list')).status, 401);
  for (const t of [user, bureau]) {
    const r = await client(gw.url, t).get('/v1/env/list');
    assert.equal(r.status, 403);
    assert.equal(errorOf(r).code, 'identity_not_allowed');
    assert.equal((await client(gw.url, t).post('/v1/env/upsert', { key: 'X_BY_USER', value: '1' })).status, 403);
  }
  assert.equal(await entry('X_BY_USER'), undefined);
});

test('rotating the admin key takes effect at once; a weak key is refused', async () => {
  const weak = await admin.post('/v1/env/upsert', { key: 'GATEWAY_ADMIN_SECRET_KEY', value: 'short' });
  assert.equal(weak.status, 400);
  const next = 'cg_admin_rotated_key_0123456789abcdef';
  assert.equal((await admin.post('/v1/env/upsert', { key: 'GATEWAY_ADMIN_SECRET_KEY', value: next })).status, 200);
  assert.equal((await client(gw.url, gw.adminKey).get('/v1/env/list')).status, 401, 'old key stops at once');
  assert.equal((await client(gw.url, next).get('/v1/env/list')).status, 200);
  admin = client(gw.url, next);
});
