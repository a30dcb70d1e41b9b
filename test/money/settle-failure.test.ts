// A charge whose database write fails is not lost: the lease flush keeps it and retries the
// same batch until it commits, once. If the process dies first, the sweeper that returns its
// lease (after the lease TTL) charges what its usage records show it never wrote: the call is
// charged its measured cost, not nothing, and once.
// The write is really made to fail: the test installs an SQLite trigger in the gateway's
// database file that refuses charge ledger rows while a flag row exists. Nothing inside
// citygate is mocked. (SQLite only: the PostgreSQL run of the service suites leaves it out.)
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { client } from '../helpers/http.ts';
import { startAiWorld, tokenFor, type AiWorld } from '../ai/setup.ts';
import { assertBooksBalance, row, sleep, until } from './setup.ts';

const PRICES = { 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } };
const START = 1_000_000;

let w: AiWorld;
before(async () => {
  w = await startAiWorld({ env: { MODEL_PRICES: JSON.stringify(PRICES), USAGE_FLUSH_MS: '20', AI_UPSTREAM_TIMEOUT_MS: '30000' } });
});
after(() => w?.close());

function writeDb(f: (db: DatabaseSync) => void): void {
  const db = new DatabaseSync(w.gw.dbPath);
  try {
    db.exec('PRAGMA busy_timeout = 10000');
    f(db);
  } finally {
    db.close();
  }
}
const failSettles = () =>
  writeDb((db) =>
    db.exec(`CREATE TABLE IF NOT EXISTS test_fail_settle (x INTEGER);
      INSERT INTO test_fail_settle VALUES (1);
      CREATE TRIGGER IF NOT EXISTS test_fail_settle BEFORE INSERT ON ledger
      WHEN NEW.kind IN ('settle', 'charge') AND EXISTS (SELECT 1 FROM test_fail_settle)
      BEGIN SELECT RAISE(ABORT, 'test: the settle write fails'); END;`),
  );
const healSettles = () => writeDb((db) => db.exec(`DELETE FROM test_fail_settle`));

/** A user with START credits; returns the user's token. */
async function funded(userId: string): Promise<string> {
  const t = await tokenFor(w.admin, 'settle-fail', userId);
  const r = await w.admin.post('/v1/balance/adjust', { city_id: 'settle-fail', user_id: userId, credits: START, reason: 'test', idempotency_key: `fund-${userId}` });
  assert.equal(r.status, 200, r.text);
  return t;
}

/** One charged call; returns its measured cost (what the stub reports, at PRICES). */
async function chargedCall(u: ReturnType<typeof client>) {
  const r = await u.post('/v1/ai/chat/completions', { model: 'stub-model', max_tokens: 50, messages: [{ role: 'user', content: 'one two three' }] });
  assert.equal(r.status, 200, r.text);
  return { cost: r.body.usage.prompt_tokens + 2 * r.body.usage.completion_tokens };
}

/** The ledger of one user, read through the admin API. */
async function ledger(userId: string): Promise<{ kind: string; credits: number; ref: string | null; request_id: string | null }[]> {
  const r = await client(w.gw.url, w.gw.adminKey).get(`/v1/balance/ledger?city_id=settle-fail&user_id=${userId}&limit=200`);
  assert.equal(r.status, 200, r.text);
  return r.body.items;
}
const balance = async (u: ReturnType<typeof client>) => (await u.get('/v1/balance/me')).body.credits as number;

describe('a settle whose write fails', () => {
  test('is retried in-process until it commits, once', async () => {
    const u = client(w.gw.url, await funded('retry'));
    failSettles();
    try {
      const { cost } = await chargedCall(u);
      // the usage record is written (its own table), the charge is not
      await until(async () => (await u.get('/v1/usage/me')).body.items.length === 1, 30_000, 'the usage record');
      await sleep(1500); // a few failing attempts
      assert.equal(await balance(u), START, 'while the write fails nothing is charged yet');
      assert.deepEqual((await ledger('retry')).map((e) => e.kind), ['adjust']);
      healSettles();
      await until(async () => (await balance(u)) === START - cost, 30_000, 'the retried flush commits');
      await sleep(500);
      assert.equal(await balance(u), START - cost);
      const kinds = (await ledger('retry')).map((e) => e.kind).sort();
      assert.deepEqual(kinds, ['adjust', 'charge']);
    } finally {
      healSettles();
    }
    await assertBooksBalance(w.gw);
  });

  test('a process that dies before the retry commits: after a restart the sweeper charges the measured cost, not nothing, once', async () => {
    const token = await funded('crash');
    const bystander = await funded('bystander');
    failSettles();
    let cost: number;
    try {
      const u = client(w.gw.url, token);
      cost = (await chargedCall(u)).cost;
      await until(async () => (await u.get('/v1/usage/me')).body.items.length === 1, 30_000, 'the usage record');
      assert.equal(await balance(u), START, 'not charged yet: the write fails');
      await w.gw.stop('SIGKILL');
    } finally {
      healSettles();
    }
    w.gw = await w.gw.restart({ BALANCE_LEASE_TTL_SECONDS: '1' });
    w.admin = client(w.gw.url, w.gw.adminKey);
    const me = client(w.gw.url, token);
    await sleep(1100);
    // another user's reservation runs the sweep (besides the one at boot)
    await client(w.gw.url, bystander).post('/v1/ai/chat/completions', { model: 'stub-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
    await until(async () => (await row<{ leased: number }>(w.gw, `SELECT leased FROM balances WHERE user_id = 'crash'`)).leased === 0, 30_000, 'the lease is returned');
    await until(async () => (await balance(me)) === START - cost!, 30_000, 'the sweeper charges the measured cost');
    const entries = await ledger('crash');
    assert.deepEqual(entries.map((e) => [e.kind, e.credits]).sort(), [['adjust', START], ['charge', -cost!]], 'charged once, from the usage record');
    await w.gw.restart({ BALANCE_LEASE_TTL_SECONDS: '1' }).then((g) => (w.gw = g));
    await sleep(1100);
    await client(w.gw.url, bystander).post('/v1/ai/chat/completions', { model: 'stub-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
    await sleep(500);
    assert.equal(await balance(client(w.gw.url, token)), START - cost!, 'another sweep charges nothing more');
    await assertBooksBalance(w.gw);
  });
});
