// The usage sink when the database write fails: the batch is retried until it commits; a
// retry after an ambiguous commit writes every record exactly once; a buffer that cannot drain
// keeps the newest records up to its limit. The failures are real: a SQLite trigger that
// RAISEs in the gateway's own database file, installed and dropped by the test through a
// second connection, as an operator's tooling or a broken migration would.
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { test } from 'node:test';
import type { BatchResult, Db, Statement } from '../../src/db/database.ts';
import { openNodeSqlite } from '../../src/db/dialects/node-sqlite.ts';
import { createGateway } from '../../src/kernel/gateway.ts';
import type { Logger } from '../../src/kernel/log.ts';
import { METERING, type MeterRecord } from '../../src/kernel/metering.ts';
import { stockServices } from '../../src/services/index.ts';
import type { UsageBuffer } from '../../src/services/usage/index.ts';
import { tempDir } from '../helpers/gateway.ts';
import { until } from '../helpers/wait.ts';

const BASE = Date.UTC(2026, 0, 10, 12);
const record = (i: number): MeterRecord => ({
  request_id: `req_${i}`,
  city_id: 'city-x',
  user_id: 'u',
  identity: 'user',
  model: 'm',
  mode: 'compat',
  status: 'ok',
  input_tokens: 1,
  output_tokens: 1,
  cached_tokens: 0,
  images: 0,
  seconds: 0,
  credits: 10,
  duration_ms: 1,
  created_at: BASE,
});

async function world(env: Record<string, string>, wrap: (db: Db) => Db = (db) => db) {
  const path = join(tempDir('citygate-sink-'), 'citygate.sqlite');
  const db = openNodeSqlite(path);
  const logs: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  const logger: Logger = (level, msg, fields) => logs.push({ level, msg, fields });
  const gw = createGateway({ db: wrap(db), services: stockServices, logger, processEnv: env, config: { gracefulStop: true } });
  await gw.init();
  const sink = gw.context.use<UsageBuffer>(METERING)!;
  const side = new DatabaseSync(path, { timeout: 10_000 });
  const failInserts = () => side.exec(`CREATE TRIGGER usage_insert_fails BEFORE INSERT ON usage BEGIN SELECT RAISE(ABORT, 'disk quota exceeded (injected)'); END`);
  const healInserts = () => side.exec('DROP TRIGGER usage_insert_fails');
  const count = () => (side.prepare('SELECT COUNT(*) AS n FROM usage').get() as { n: number }).n;
  const daily = () => {
    const row = side.prepare(`SELECT SUM(calls) AS calls, SUM(credits) AS credits FROM usage_hourly WHERE city_id = 'city-x' HAVING COUNT(*) > 0`).get() as { calls: number; credits: number } | undefined;
    return row && { calls: row.calls, credits: row.credits };
  };
  const requestIds = () => (side.prepare('SELECT request_id FROM usage ORDER BY seq').all() as { request_id: string }[]).map((r) => r.request_id);
  return {
    gw, sink, logs, failInserts, healInserts, count, daily, requestIds,
    async close() {
      await gw.stop();
      side.close();
    },
  };
}

test('a failed flush is retried by itself until it commits, records and rollup once', async () => {
  const w = await world({ USAGE_FLUSH_MS: '10' });
  try {
    w.failInserts();
    for (let i = 0; i < 3; i++) w.sink.record(record(i));
    await until('the failed flush to be logged', () => w.logs.find((l) => l.msg === 'usage flush failed; will retry'), 30_000);
    assert.equal(w.count(), 0, 'nothing written while the database refuses');
    assert.equal(w.daily(), undefined, 'no rollup without its records');
    assert.equal(w.sink.pending, 3, 'the records wait in memory');
    w.healInserts();
    // No flush is called by the test: the sink's own retry writes them.
    await until('the retry to write the records', () => w.count() === 3, 30_000);
    assert.deepEqual(w.daily(), { calls: 3, credits: 30 });
    assert.equal(w.sink.pending, 0);
  } finally {
    await w.close();
  }
});

test('a retry after an ambiguous commit (written, but the answer lost) writes every record exactly once, also those that arrived meanwhile', async () => {
  // The transport of a remote database (D1) can lose the answer to a batch that committed:
  // the first batch really commits in the file, then its answer is lost.
  let loseNextAnswer = false;
  const lossy = (db: Db): Db => ({
    ...db,
    async batch(queries: readonly Statement[]): Promise<BatchResult[]> {
      const r = await db.batch(queries);
      if (loseNextAnswer) {
        loseNextAnswer = false;
        throw new Error('D1_ERROR: Network connection lost.');
      }
      return r;
    },
  });
  const w = await world({ USAGE_FLUSH_MS: '60000' }, lossy);
  try {
    for (let i = 0; i < 3; i++) w.sink.record(record(i));
    loseNextAnswer = true;
    await w.sink.flush();
    assert.equal(w.count(), 3, 'the first attempt committed');
    assert.equal(w.sink.pending, 3, 'but the sink does not know it');
    for (let i = 3; i < 5; i++) w.sink.record(record(i));
    await w.sink.flush();
    assert.equal(w.sink.pending, 0);
    assert.deepEqual(w.requestIds(), ['req_0', 'req_1', 'req_2', 'req_3', 'req_4'], 'each record once, none lost');
    assert.deepEqual(w.daily(), { calls: 5, credits: 50 }, 'the rollup counts each record once');
  } finally {
    await w.close();
  }
});

// Also guards the token counting that wraps the sink: 200,000 records of one city must share
// one city look-up (they did not, and this test never resolved).
test('a buffer that cannot drain keeps the newest 200,000 records, logs the drop, and writes them once the database is back', async () => {
  const w = await world({ USAGE_FLUSH_MS: '60000', USAGE_BATCH_SIZE: '5000' });
  try {
    w.failInserts();
    const n = 200_000 + 7;
    for (let i = 0; i < n; i++) w.sink.record(record(i));
    assert.equal(w.sink.pending, 200_000);
    assert.ok(w.logs.some((l) => l.level === 'error' && l.msg === 'usage buffer full: oldest records dropped'));
    await w.sink.flush();
    assert.equal(w.count(), 0);
    w.healInserts();
    await w.sink.flush();
    assert.equal(w.sink.pending, 0);
    assert.equal(w.count(), 200_000);
    const ids = w.requestIds();
    assert.equal(ids[0], 'req_7', 'the oldest seven were dropped');
    assert.equal(ids.at(-1), `req_${n - 1}`);
    assert.deepEqual(w.daily(), { calls: 200_000, credits: 2_000_000 });
  } finally {
    await w.close();
  }
});
