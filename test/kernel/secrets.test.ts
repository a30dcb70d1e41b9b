// Secrets at rest (issue 15): secret env values and upstream API keys (ai/upstreams/*) are
// sealed (AES-256-GCM) under a master key; a dump of the database shows none of them, the
// admin key stays readable by SQL, secrets stored in clear by an older version are sealed at
// boot, and a wrong master key refuses to start without changing anything.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, test } from 'node:test';
import { readAdminKey, startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { sqlAll } from '../helpers/sql.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

const SECRETS: Record<string, string> = {
  TEXTPROVIDER_API_KEY: 'sk-live-provider-3f9a1c7e5b2d',
  PAYMENT_A_SECRET_KEY: 'sk_test_stripe_8d7c6b5a4f3e',
  PAYMENT_A_WEBHOOK_SECRET: 'whsec_stripe_1a2b3c4d5e6f',
  PAYMENT_B_API_KEY: 'creem_test_key_9z8y7x6w',
  OAUTH_A_CLIENT_SECRET: 'gh-oauth-secret-55aa66bb',
  SMTP_PASSWORD: 'hunter2-smtp-password-x',
};
const PLAIN = { PAYMENT_B_PRODUCT_ID: 'prod_visible_123' };
/** An upstream's API key (ai_upstreams.api_key), set through ai/upstreams/create. */
const UPSTREAM_KEY = 'sk-upstream-at-rest-7e6d5c4b';

/** Every row of every table, as `sqlite3 .dump` would print it. */
function dump(dbPath: string): string {
  const db = new DatabaseSync(dbPath, { readOnly: true });
  try {
    const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as { name: string }[];
    return tables.map((t) => `${t.name}: ${JSON.stringify(db.prepare(`SELECT * FROM "${t.name}"`).all())}`).join('\n');
  } finally {
    db.close();
  }
}

/** The raw bytes of the database and its WAL. */
function fileBytes(dir: string): string {
  return readdirSync(dir)
    .filter((f) => f.startsWith('citygate.sqlite') && !f.endsWith('.master-key'))
    .map((f) => readFileSync(join(dir, f)).toString('latin1'))
    .join('');
}

const running: TestGateway[] = [];
const stubs = new Map<string, Promise<OpenAIStub>>();
after(async () => {
  for (const g of running) await g.stop();
  for (const s of stubs.values()) await (await s).close();
});

/** An upstream stub that accepts only `key` (else 401): a served call proves the key opened. */
function upstreamStub(key: string): Promise<OpenAIStub> {
  let s = stubs.get(key);
  if (!s) stubs.set(key, (s = startOpenAIStub({ apiKey: key })));
  return s;
}

/** Calls `model` as the admin: served, so its upstream got the key in clear (opened from the database). */
async function servedWithKey(gw: TestGateway, model: string, key: string): Promise<void> {
  const s = await upstreamStub(key);
  const r = await call(gw.url, 'POST', '/v1/ai/chat/completions', { token: gw.adminKey, body: { model, messages: [{ role: 'user', content: 'hi' }] } });
  assert.equal(r.status, 200, r.text);
  assert.equal(s.requests.at(-1)?.headers.authorization, `Bearer ${key}`, 'the upstream got the key in clear');
}

test('secret env values are sealed at rest; the admin key stays readable by SQL; the key file is 0600', async () => {
  const gw = await startGateway();
  running.push(gw);
  const admin = client(gw.url, gw.adminKey);
  const imported = await admin.post('/v1/env/import', { content: Object.entries({ ...SECRETS, ...PLAIN }).map(([k, v]) => `${k}=${v}`).join('\n') });
  assert.equal(imported.status, 200, imported.text);
  assert.equal((await admin.post('/v1/env/upsert', { key: 'OAUTH_B_CLIENT_SECRET', value: 'google-secret-77cc88dd' })).status, 200);

  const revealed = await admin.get('/v1/env/list?reveal=true');
  const values = Object.fromEntries(revealed.body.items.map((e: { key: string; value: string }) => [e.key, e.value]));
  for (const [k, v] of Object.entries(SECRETS)) assert.equal(values[k], v, `${k} reads back in clear through the API`);
  assert.equal(values.OAUTH_B_CLIENT_SECRET, 'google-secret-77cc88dd');
  // An upstream's key: write-only through the API (the list shows the last 4 only), and it serves.
  const s = await upstreamStub(UPSTREAM_KEY);
  const up = await admin.post('/v1/ai/upstreams/create', { name: 'sealed', kind: 'openai-compatible', base_url: s.url, api_key: UPSTREAM_KEY, models: [{ id: 'sealed-model', upstream_model: 'stub-model' }] });
  assert.equal(up.status, 200, up.text);
  const listed = (await admin.get('/v1/ai/upstreams/list')).body.items.find((u: { upstream_id: string }) => u.upstream_id === up.body.upstream_id);
  assert.deepEqual({ has_key: listed.has_key, key_last4: listed.key_last4, api_key: listed.api_key }, { has_key: true, key_last4: '5c4b', api_key: undefined });
  assert.equal(JSON.stringify(listed).includes(UPSTREAM_KEY), false, 'the list never shows the key');
  await servedWithKey(gw, 'sealed-model', UPSTREAM_KEY);

  const d = dump(gw.dbPath);
  const bytes = fileBytes(gw.dir);
  for (const v of [...Object.values(SECRETS), 'google-secret-77cc88dd', UPSTREAM_KEY]) {
    assert.equal(d.includes(v), false, `the dump shows ${v}`);
    assert.equal(bytes.includes(v), false, `the file bytes show ${v}`);
  }
  assert.ok(d.includes(PLAIN.PAYMENT_B_PRODUCT_ID), 'non-secret values stay plain');
  assert.match(d, /enc:v1:/);
  assert.match(d, /ai_upstreams: .*"api_key":"enc:v1:/, 'the upstream key is stored sealed');
  // The admin key: a plain SQL select, and it works.
  const key = await readAdminKey(gw.dbPath);
  assert.match(key, /^cg_admin_/);
  assert.equal((await client(gw.url, key).get('/v1/env/list')).status, 200);
  assert.equal(statSync(`${gw.dbPath}.master-key`).mode & 0o777, 0o600);
  // Other processes of the same database open the same secrets.
  const second = await startGateway({ dir: gw.dir });
  running.push(second);
  const again = await client(second.url, key).get('/v1/env/list?reveal=true');
  assert.equal(again.body.items.find((e: { key: string }) => e.key === 'PAYMENT_A_SECRET_KEY').value, SECRETS.PAYMENT_A_SECRET_KEY);
  await servedWithKey(second, 'sealed-model', UPSTREAM_KEY);
  // A key changed through ai/upstreams/update is sealed too.
  const rekeyed = await admin.post('/v1/ai/upstreams/update', { upstream_id: up.body.upstream_id, api_key: 'sk-upstream-rekeyed-1a2b3c4d', base_url: (await upstreamStub('sk-upstream-rekeyed-1a2b3c4d')).url });
  assert.equal(rekeyed.status, 200, rekeyed.text);
  assert.equal(rekeyed.body.key_last4, '3c4d');
  await servedWithKey(gw, 'sealed-model', 'sk-upstream-rekeyed-1a2b3c4d');
  assert.equal(dump(gw.dbPath).includes('sk-upstream-rekeyed-1a2b3c4d'), false, 'an updated key is sealed');
  // A sealed key copied with SQL into another upstream's row does not open there (bound to its row).
  const thief = await admin.post('/v1/ai/upstreams/create', { name: 'thief', kind: 'openai-compatible', base_url: (await upstreamStub('sk-upstream-rekeyed-1a2b3c4d')).url, api_key: 'sk-thief-own-key-00000000', models: [{ id: 'thief-model', upstream_model: 'stub-model' }] });
  assert.equal(thief.status, 200, thief.text);
  await sqlAll(gw, `UPDATE ai_upstreams SET api_key = (SELECT api_key FROM ai_upstreams WHERE upstream_id = ?) WHERE upstream_id = ?`, [up.body.upstream_id, thief.body.upstream_id]);
  const moved = (await admin.get('/v1/ai/upstreams/list')).body.items.find((u: { upstream_id: string }) => u.upstream_id === thief.body.upstream_id);
  assert.equal(moved.has_key, false, 'the moved key does not open');
  const refused = await call(gw.url, 'POST', '/v1/ai/chat/completions', { token: gw.adminKey, body: { model: 'thief-model', messages: [{ role: 'user', content: 'hi' }] } });
  assert.notEqual(refused.status, 200, refused.text);
  await second.stop();
});

test('secrets stored in clear by an older version are sealed at the next boot', async () => {
  const masterKey = 'a'.repeat(64);
  let gw = await startGateway({ env: { CITYGATE_MASTER_KEY: masterKey } });
  running.push(gw);
  await gw.stop();
  // An older citygate wrote them in clear.
  const db = new DatabaseSync(gw.dbPath);
  const ins = db.prepare(`INSERT OR REPLACE INTO env (key, value, updated_at) VALUES (?, ?, 0)`);
  for (const [k, v] of Object.entries(SECRETS)) ins.run(k, v);
  // …and an upstream whose key is in clear (ai_upstreams before the keys were sealed).
  const s = await upstreamStub(UPSTREAM_KEY);
  db.prepare(
    `INSERT INTO ai_upstreams (upstream_id, name, kind, base_url, api_key, models, weight, priority, enabled, timeout_ms, created_at, updated_at)
     VALUES ('ups_old', 'old', 'openai-compatible', ?, ?, ?, 1, 0, 1, NULL, 0, 0)`,
  ).run(s.url, UPSTREAM_KEY, JSON.stringify([{ id: 'old-model', upstream_model: 'stub-model' }]));
  db.close();
  assert.ok(dump(gw.dbPath).includes(SECRETS.TEXTPROVIDER_API_KEY));
  assert.ok(dump(gw.dbPath).includes(UPSTREAM_KEY));

  gw = await startGateway({ dir: gw.dir, env: { CITYGATE_MASTER_KEY: masterKey } });
  running.push(gw);
  const d = dump(gw.dbPath);
  for (const v of [...Object.values(SECRETS), UPSTREAM_KEY]) assert.equal(d.includes(v), false, `still in clear: ${v}`);
  const list = await client(gw.url, gw.adminKey).get('/v1/env/list?reveal=true');
  assert.equal(list.body.items.find((e: { key: string }) => e.key === 'TEXTPROVIDER_API_KEY').value, SECRETS.TEXTPROVIDER_API_KEY);
  await servedWithKey(gw, 'old-model', UPSTREAM_KEY);
  // No key file: the master key came from CITYGATE_MASTER_KEY.
  assert.throws(() => statSync(`${gw.dbPath}.master-key`));
  await gw.stop();
});

test('a wrong master key refuses to start with a clear message and changes nothing', async () => {
  const gw = await startGateway({ env: { CITYGATE_MASTER_KEY: 'b'.repeat(64) } });
  running.push(gw);
  await client(gw.url, gw.adminKey).post('/v1/env/upsert', { key: 'TEXTPROVIDER_API_KEY', value: SECRETS.TEXTPROVIDER_API_KEY });
  await gw.stop();
  const before = dump(gw.dbPath);

  const main = resolve(import.meta.dirname, '../../src/cli/main.ts');
  const run = (key: string) =>
    spawnSync(process.execPath, [main, 'serve'], {
      env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', DATABASE_PATH: gw.dbPath, CITYGATE_MASTER_KEY: key },
      encoding: 'utf8',
      timeout: 30_000,
    });
  const wrong = run('c'.repeat(64));
  assert.notEqual(wrong.status, 0);
  assert.match(wrong.stderr, /master key .* is not the one this database's secrets are sealed with .*Refusing to start; nothing was changed/);
  assert.doesNotMatch(wrong.stderr, /listening on/);
  const garbage = run('not-a-key');
  assert.notEqual(garbage.status, 0);
  assert.match(garbage.stderr, /CITYGATE_MASTER_KEY must be 32 random bytes/);
  assert.equal(dump(gw.dbPath), before, 'the database is unchanged');

  const right = await startGateway({ dir: gw.dir, env: { CITYGATE_MASTER_KEY: 'b'.repeat(64) } });
  running.push(right);
  const list = await client(right.url, right.adminKey).get('/v1/env/list?reveal=true');
  assert.equal(list.body.items.find((e: { key: string }) => e.key === 'TEXTPROVIDER_API_KEY').value, SECRETS.TEXTPROVIDER_API_KEY);
  await right.stop();
  void tempDir;
});
