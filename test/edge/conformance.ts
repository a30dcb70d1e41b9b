// Black-box HTTP checks that every runtime of the gateway must pass the same way (Node
// server, Worker in workerd): health, cities, tokens, env and the city_id rule.
import assert from 'node:assert/strict';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { call, client, errorOf } from '../helpers/http.ts';

export interface Target {
  url: string;
  adminKey: string;
}

let seq = 0;
const uniq = (p: string) => `${p}-${process.pid}-${Date.now().toString(36)}-${seq++}`;

export const conformance: Record<string, (t: Target) => Promise<void>> = {
  async 'health and root answer without a credential'(t) {
    const h = await call(t.url, 'GET', '/health');
    assert.equal(h.status, 200);
    assert.equal(h.body.ok, true);
    for (const s of ['env', 'cities']) assert.ok(h.body.services.includes(s), `health lists ${s}`);
    const root = await call(t.url, 'GET', '/');
    assert.equal(root.status, 200);
  },

  async 'credentials decide the identity'(t) {
    const none = await call(t.url, 'GET', '/v1/cities/list');
    assert.equal(none.status, 401);
    assert.equal(errorOf(none).code, 'missing_credential');
    const bad = await call(t.url, 'GET', '/v1/cities/list', { token: 'cg_admin_not-the-key-at-all-000000' });
    assert.equal(bad.status, 401);
    assert.equal(errorOf(bad).code, 'invalid_token');
    assert.equal((await call(t.url, 'GET', '/v1/cities/list', { token: t.adminKey })).status, 200);
    assert.equal((await call(t.url, 'GET', '/v1/nope/list', { token: t.adminKey })).status, 404);
    assert.equal((await call(t.url, 'POST', '/v1/cities/list', { token: t.adminKey, body: {} })).status, 405);
    const badJson = await call(t.url, 'POST', '/v1/cities/create', { token: t.adminKey, raw: '{nope', headers: { 'content-type': 'application/json' } });
    assert.equal(badJson.status, 400);
  },

  async 'cities: create, list, pause, activate, remove'(t) {
    const admin = client(t.url, t.adminKey);
    const id = uniq('c');
    const created = await admin.post('/v1/cities/create', { name: 'Conformance', city_id: id });
    assert.equal(created.status, 200, created.text);
    assert.equal(created.body.city_id, id);
    assert.equal(created.body.status, 'active');
    assert.equal((await admin.post('/v1/cities/create', { name: 'Again', city_id: id })).status, 409);
    const bad = await admin.post('/v1/cities/create', { name: 'Bad', city_id: 'no spaces' });
    assert.equal(bad.status, 400);
    assert.equal(errorOf(bad).param, 'city_id');
    assert.ok((await admin.get('/v1/cities/list')).body.items.some((c: { city_id: string }) => c.city_id === id));

    const tok = await admin.post('/v1/cities/tokens/apply', { city_id: id, user_id: 'u1' });
    assert.equal(tok.status, 200, tok.text);
    assert.equal((await admin.post('/v1/cities/pause', { city_id: id })).body.status, 'paused');
    assert.equal((await admin.post('/v1/cities/tokens/apply', { city_id: id, user_id: 'u1' })).status, 409);
    assert.equal((await admin.post('/v1/cities/activate', { city_id: id })).body.status, 'active');
    assert.equal((await admin.post('/v1/cities/remove', { city_id: id })).status, 200);
    assert.ok(!(await admin.get('/v1/cities/list')).body.items.some((c: { city_id: string }) => c.city_id === id));
    assert.equal((await admin.post('/v1/cities/pause', { city_id: id })).status, 404);
  },

  async 'tokens: a user token is an EdDSA JWT bound to one city, verifiable with the JWKS'(t) {
    const admin = client(t.url, t.adminKey);
    const id = uniq('t');
    await admin.post('/v1/cities/create', { name: 'Tokens', city_id: id });
    const r = await admin.post('/v1/cities/tokens/apply', { city_id: id, user_id: 'alice', ttl: 3600 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.city_id, id);
    assert.equal(r.body.user_id, 'alice');
    const jwks = await call(t.url, 'GET', '/.well-known/jwks.json');
    assert.equal(jwks.status, 200);
    const { payload, protectedHeader } = await jwtVerify(r.body.user_token, createLocalJWKSet(jwks.body));
    assert.equal(protectedHeader.alg, 'EdDSA');
    assert.equal(payload.sub, 'alice');
    assert.equal(payload.cid, id);
    // A user token is not an admin credential.
    const asUser = await call(t.url, 'GET', '/v1/cities/list', { token: r.body.user_token });
    assert.equal(asUser.status, 403);
    assert.equal(errorOf(asUser).code, 'identity_not_allowed');
    // Tokens of a removed city stop working: the same call on an action open to users
    // answers 200 before the removal and 401 invalid_token after it.
    const mine = await call(t.url, 'GET', '/v1/balance/me', { token: r.body.user_token });
    assert.equal(mine.status, 200, mine.text);
    assert.equal(mine.body.user_id, 'alice');
    assert.equal((await admin.post('/v1/cities/remove', { city_id: id })).status, 200);
    const gone = await call(t.url, 'GET', '/v1/balance/me', { token: r.body.user_token });
    assert.equal(gone.status, 401, `removed city's token refused: ${gone.text}`);
    assert.equal(errorOf(gone).code, 'invalid_token');
  },

  async 'a bureau token of a removed city stops working'(t) {
    const admin = client(t.url, t.adminKey);
    const id = uniq('br');
    assert.equal((await admin.post('/v1/cities/create', { name: 'Bureau city', city_id: id })).status, 200);
    const bureau = await admin.post('/v1/bureaus/create', { city_id: id, name: 'backend' });
    assert.equal(bureau.status, 200, bureau.text);
    const asBureau = client(t.url, bureau.body.bureau_token);
    const before = await asBureau.get('/v1/cities/list');
    assert.equal(before.status, 200, before.text);
    assert.deepEqual(before.body.items.map((c: { city_id: string }) => c.city_id), [id]);
    assert.equal((await asBureau.post('/v1/cities/tokens/apply', { city_id: id, user_id: 'u' })).status, 200);
    assert.equal((await admin.post('/v1/cities/remove', { city_id: id })).status, 200);
    for (const r of [await asBureau.get('/v1/cities/list'), await asBureau.post('/v1/cities/tokens/apply', { city_id: id, user_id: 'u' })]) {
      assert.equal(r.status, 401, r.text);
      assert.equal(errorOf(r).code, 'invalid_token');
    }
  },

  async 'env: upsert, list masked, reveal, import, remove'(t) {
    const admin = client(t.url, t.adminKey);
    const k = `CONF_${seq++}_API_KEY`;
    assert.equal((await admin.post('/v1/env/upsert', { key: k, value: 'sk-conformance-1234567890' })).status, 200);
    const listed = (await admin.get('/v1/env/list')).body.items.find((e: { key: string }) => e.key === k);
    assert.ok(listed, 'listed');
    assert.notEqual(listed.value, 'sk-conformance-1234567890');
    assert.equal(listed.secret, true);
    const revealed = (await admin.get('/v1/env/list?reveal=true')).body.items.find((e: { key: string }) => e.key === k);
    assert.equal(revealed.value, 'sk-conformance-1234567890');
    const imp = await admin.post('/v1/env/import', { content: `CONF_A=1\n# comment\nCONF_B="two words"\n` });
    assert.equal(imp.status, 200, imp.text);
    assert.equal(imp.body.imported, 2);
    const all = (await admin.get('/v1/env/list')).body.items as { key: string; value: string }[];
    assert.equal(all.find((e) => e.key === 'CONF_B')?.value, 'two words');
    assert.equal((await admin.post('/v1/env/remove', { key: k })).status, 200);
    assert.equal((await admin.post('/v1/env/remove', { key: k })).status, 404);
    assert.equal((await admin.post('/v1/env/remove', { key: 'GATEWAY_ADMIN_SECRET_KEY' })).status, 400);
    const badKey = await admin.post('/v1/env/upsert', { key: 'lower-case', value: 'x' });
    assert.equal(badKey.status, 400);
    assert.equal(errorOf(badKey).param, 'key');
    // The admin key is in the env table and never listed in clear without reveal.
    const adminEntry = (await admin.get('/v1/env/list')).body.items.find((e: { key: string }) => e.key === 'GATEWAY_ADMIN_SECRET_KEY');
    assert.ok(adminEntry);
    assert.notEqual(adminEntry.value, t.adminKey);
  },

  async 'city_id rule: a body city_id other than the bound city is 403'(t) {
    const admin = client(t.url, t.adminKey);
    const a = uniq('a');
    const b = uniq('b');
    await admin.post('/v1/cities/create', { name: 'A', city_id: a });
    await admin.post('/v1/cities/create', { name: 'B', city_id: b });
    const bureau = await admin.post('/v1/bureaus/create', { city_id: a, name: 'backend of A' });
    assert.equal(bureau.status, 200, bureau.text);
    const asBureau = client(t.url, bureau.body.bureau_token);
    const other = await asBureau.post('/v1/cities/tokens/apply', { city_id: b, user_id: 'u' });
    assert.equal(other.status, 403);
    assert.equal(errorOf(other).code, 'city_mismatch');
    const own = await asBureau.post('/v1/cities/tokens/apply', { city_id: a, user_id: 'u' });
    assert.equal(own.status, 200, own.text);
    const listed = await asBureau.get('/v1/cities/list');
    assert.deepEqual(listed.body.items.map((c: { city_id: string }) => c.city_id), [a]);
  },
};
