// The usage sink's batch writes: multi-row INSERTs within the dialect's bound-parameter limit
// (D1: 100 per statement), every record written once, the daily rollup in step, and the
// per-request writes of a runtime without a graceful stop (a Worker).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import { compile, type Db, type Statement } from '../../src/db/database.ts';
import { openNodeSqlite } from '../../src/db/dialects/node-sqlite.ts';
import { createGateway } from '../../src/kernel/gateway.ts';
import { silentLogger } from '../../src/kernel/log.ts';
import { METERING, type MeterRecord } from '../../src/kernel/metering.ts';
import { stockServices } from '../../src/services/index.ts';
import type { UsageBuffer } from '../../src/services/usage/index.ts';

/** node:sqlite posing as D1: refuses a statement with more than 100 bound parameters, as D1 does. */
function d1Like(db: Db, seen: number[]): Db {
  return {
    kysely: db.kysely,
    dialect: 'd1',
    async batch(queries: readonly Statement[]) {
      for (const q of queries) {
        const n = compile(q).parameters.length;
        seen.push(n);
        if (n > 100) throw new Error(`too many SQL variables: ${n}`);
      }
      return db.batch(queries);
    },
    close: () => db.close(),
  };
}

const DAY = 86_400_000;
const record = (i: number, base: number): MeterRecord => ({
  request_id: `req_${i}`,
  city_id: `city-${i % 3}`,
  user_id: `user-${i % 7}`,
  identity: 'user',
  model: `model-${i % 2}`,
  mode: 'compat',
  status: i % 10 === 0 ? 'error' : 'ok',
  input_tokens: i,
  output_tokens: 2 * i,
  cached_tokens: i % 5,
  images: 0,
  seconds: 0,
  credits: 3 * i,
  duration_ms: i % 100,
  created_at: base + (i % 2) * DAY,
});

async function world(dialect: 'sqlite' | 'd1', env: Record<string, string>, gracefulStop = true) {
  const raw = openNodeSqlite(':memory:');
  const seen: number[] = [];
  const db = dialect === 'd1' ? d1Like(raw, seen) : raw;
  const gw = createGateway({ db, services: stockServices, logger: silentLogger, processEnv: env, config: { gracefulStop } });
  await gw.init();
  const sink = gw.context.use<UsageBuffer>(METERING)!;
  return { raw, gw, sink, seen };
}

async function check(raw: Db, n: number, base: number) {
  const rows = await raw.kysely.selectFrom('usage').selectAll().orderBy('seq').execute();
  assert.equal(rows.length, n);
  assert.equal(new Set(rows.map((r) => r.usage_id)).size, n, 'usage ids are unique');
  assert.deepEqual(rows.map((r) => r.request_id).sort(), Array.from({ length: n }, (_, i) => `req_${i}`).sort());
  const r7 = rows.find((r) => r.request_id === 'req_7')!;
  assert.equal(r7.city_id, 'city-1');
  assert.equal(r7.user_id, 'user-0');
  assert.equal(r7.input_tokens, 7);
  assert.equal(r7.output_tokens, 14);
  assert.equal(r7.cached_tokens, 2);
  assert.equal(r7.credits, 21);
  assert.equal(r7.created_at, base + DAY);
  // the rollup equals the records, group by group
  const { rows: daily } = await sql<{ day: string; city_id: string; model: string; calls: number; errors: number; input_tokens: number; credits: number }>`
    SELECT strftime('%Y-%m-%d', hour / 1000, 'unixepoch') AS day, city_id, model, SUM(calls) AS calls, SUM(errors) AS errors,
      SUM(input_tokens) AS input_tokens, SUM(credits) AS credits FROM usage_hourly GROUP BY day, city_id, model`.execute(raw.kysely);
  const expect = new Map<string, { calls: number; errors: number; input_tokens: number; credits: number }>();
  for (const r of rows) {
    const k = `${new Date(r.created_at).toISOString().slice(0, 10)}|${r.city_id}|${r.model}`;
    const g = expect.get(k) ?? { calls: 0, errors: 0, input_tokens: 0, credits: 0 };
    g.calls++;
    if (r.status !== 'ok') g.errors++;
    g.input_tokens += r.input_tokens;
    g.credits += r.credits;
    expect.set(k, g);
  }
  assert.equal(daily.length, expect.size);
  for (const d of daily) {
    const { calls, errors, input_tokens, credits } = d;
    assert.deepEqual({ calls, errors, input_tokens, credits }, expect.get(`${d.day}|${d.city_id}|${d.model}`));
  }
}

for (const dialect of ['sqlite', 'd1'] as const) {
  test(`${dialect}: a batch of any size is written whole, within the parameter limit, with its rollup`, async () => {
    const { raw, gw, sink, seen } = await world(dialect, { USAGE_FLUSH_MS: '60000', USAGE_BATCH_SIZE: '700' });
    const base = Date.UTC(2026, 0, 10, 12);
    for (let i = 0; i < 1234; i++) sink.record(record(i, base)); // two full batches and a rest
    await sink.flush();
    assert.equal(sink.pending, 0);
    if (dialect === 'd1') assert.ok(seen.length > 0 && seen.every((n) => n <= 100), `parameters per statement: ${Math.max(...seen)}`);
    await check(raw, 1234, base);
    await gw.stop();
  });
}

test('d1 without a graceful stop: each record is written after its request, none waits for a later batch', async () => {
  const { raw, gw, sink } = await world('d1', {}, false);
  const base = Date.UTC(2026, 0, 10, 12);
  for (let i = 0; i < 23; i++) sink.record(record(i, base));
  await gw.idle();
  assert.equal(sink.pending, 0);
  await check(raw, 23, base);
  await gw.stop();
});

test('graceful stop writes everything buffered', async () => {
  const { raw, gw, sink } = await world('sqlite', { USAGE_FLUSH_MS: '60000' });
  const base = Date.UTC(2026, 0, 10, 12);
  for (let i = 0; i < 41; i++) sink.record(record(i, base));
  assert.equal(sink.pending, 41);
  await gw.stop();
  await check(raw, 41, base);
});

test('sqlite: a batch retried after its commit answer was lost is refused whole, and the records after it are written: each record and its rollup once', async () => {
  // The usage INSERT is `OR ROLLBACK` on SQLite (no statement journal): its conflict must still
  // fail the retried batch whole, leave the connection usable, and count nothing twice.
  const raw = openNodeSqlite(':memory:');
  let loseNextAnswer = false;
  const db: Db = {
    ...raw,
    async batch(queries: readonly Statement[]) {
      const r = await raw.batch(queries);
      if (loseNextAnswer && queries.some((q) => /into "usage"/i.test(compile(q).sql))) {
        loseNextAnswer = false;
        throw new Error('disk I/O error (the commit went through; its answer did not)');
      }
      return r;
    },
  };
  const gw = createGateway({ db, services: stockServices, logger: silentLogger, processEnv: { USAGE_FLUSH_MS: '60000' } });
  await gw.init();
  const sink = gw.context.use<UsageBuffer>(METERING)!;
  const base = Date.UTC(2026, 0, 10, 12);
  for (let i = 0; i < 30; i++) sink.record(record(i, base));
  loseNextAnswer = true;
  await sink.flush();
  assert.equal(sink.pending, 30, 'the sink thinks the batch failed');
  for (let i = 30; i < 45; i++) sink.record(record(i, base));
  await sink.flush();
  assert.equal(sink.pending, 0);
  await check(raw, 45, base);
  await gw.stop();
});
