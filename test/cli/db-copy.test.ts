// `citygate db copy`: a SQLite deployment moved to a new PostgreSQL database keeps its admin
// key, cities, tokens, balances, ledger and usage, and goes on writing after the move.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { runCli } from '../helpers/cli.ts';
import { startGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { createTestDatabase, pgSkipReason } from '../helpers/postgres.ts';
import { assertBooksBalance, row } from '../money/setup.ts';

const skip = await pgSkipReason();

test('db copy --from sqlite:PATH --to postgres://…: the gateway carries on where it was', { skip, timeout: 120_000 }, async () => {
  let gw = await startGateway({ postgres: false, env: { BALANCE_INITIAL_CREDITS: '500' } });
  const admin = client(gw.url, gw.adminKey);
  await admin.post('/v1/cities/create', { name: 'Moving', city_id: 'moving' });
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'moving', user_id: 'mia' })).body.user_token;
  const bureau = (await admin.post('/v1/bureaus/create', { city_id: 'moving', name: 'backend' })).body.bureau_token;
  await admin.post('/v1/env/upsert', { key: 'KEEP_ME', value: 'kept' });
  for (let i = 0; i < 3; i++) {
    const r = await admin.post('/v1/balance/adjust', { city_id: 'moving', user_id: 'mia', credits: 100 + i, reason: 'gift', idempotency_key: `gift-${i}` });
    assert.equal(r.status, 200, r.text);
  }
  const before = (await client(gw.url, token).get('/v1/balance/me')).body.credits;
  assert.equal(await gw.stop(), 0);
  // a usage record of 20 days ago (as a gateway's sink wrote it then)
  const old = Date.now() - 20 * 86_400_000;
  const file = new DatabaseSync(gw.dbPath);
  file.prepare(`INSERT INTO usage (usage_id, request_id, city_id, user_id, identity, model, mode, status, input_tokens, output_tokens, cached_tokens, images, seconds, credits, duration_ms, created_at)
    VALUES ('use_old', 'req_old', 'moving', 'mia', 'user', 'm', 'compat', 'ok', 1, 1, 0, 0, 0, 3, 5, ?)`).run(old);
  file.close();

  const db = await createTestDatabase();
  const usage = await runCli(['db', 'copy', '--from', 'sqlite:nowhere.sqlite', '--to', db.url]);
  assert.notEqual(usage.code, 0);
  assert.match(usage.stderr, /no SQLite database/);

  const copy = await runCli(['db', 'copy', '--from', `sqlite:${gw.dbPath}`, '--to', db.url, '--json']);
  assert.equal(copy.code, 0, copy.stderr);
  const report = JSON.parse(copy.stdout);
  assert.equal(report.tables.cities, 1);
  assert.equal(report.tables.ledger, 4, 'the grant and three gifts');

  const again = await runCli(['db', 'copy', '--from', `sqlite:${gw.dbPath}`, '--to', db.url]);
  assert.notEqual(again.code, 0, 'a second copy into the same database is refused');
  assert.match(again.stderr, /is not empty/);

  // On PostgreSQL the master key is given, not read from a file: the one generated next to the SQLite file.
  const masterKey = readFileSync(`${gw.dbPath}.master-key`, 'utf8').trim();
  gw = await startGateway({ dir: gw.dir, env: { DATABASE_URL: db.url, CITYGATE_MASTER_KEY: masterKey, BALANCE_INITIAL_CREDITS: '500' } });
  try {
    assert.equal(gw.databaseUrl, db.url);
    assert.equal(gw.stderr().includes('generated the admin key'), false, 'the copied admin key is used');
    const a = client(gw.url, gw.adminKey);
    assert.deepEqual((await a.get('/v1/cities/list')).body.items.map((c: { city_id: string }) => c.city_id), ['moving']);
    assert.equal((await a.get('/v1/env/list')).body.items.find((e: { key: string }) => e.key === 'KEEP_ME')?.value, 'kept');
    const mia = client(gw.url, token);
    assert.equal((await mia.get('/v1/cities/current')).status, 200, 'a token issued before the move still verifies');
    assert.equal((await client(gw.url, bureau).get('/v1/cities/list')).status, 200, 'so does a bureau token');
    assert.equal((await mia.get('/v1/balance/me')).body.credits, before);
    // new ledger rows continue after the copied ones
    const r = await a.post('/v1/balance/adjust', { city_id: 'moving', user_id: 'mia', credits: 7, reason: 'after', idempotency_key: 'after-move' });
    assert.equal(r.status, 200, r.text);
    const replay = await a.post('/v1/balance/adjust', { city_id: 'moving', user_id: 'mia', credits: 100, reason: 'gift', idempotency_key: 'gift-0' });
    assert.equal(replay.body.credits, before + 7, 'an idempotency key used before the move is still a replay');
    assert.equal((await row<{ n: number }>(gw, `SELECT COUNT(*) AS n FROM ledger`)).n, 5);
    const day = `usage_p${new Date(old).toISOString().slice(0, 10).replace(/-/g, '')}`;
    assert.equal((await row<{ t: string }>(gw, `SELECT tableoid::regclass::text AS t FROM usage WHERE usage_id = 'use_old'`)).t, day, 'the old record sits in its own day table (PostgreSQL partitions), not the DEFAULT one');
    await assertBooksBalance(gw);
  } finally {
    await gw.stop();
  }
});
