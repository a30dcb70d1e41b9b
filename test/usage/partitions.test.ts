// PostgreSQL's daily partitions of usage (migration 088, services/usage/partitions.ts): a
// retention pass drops the days older than USAGE_RETENTION_DAYS as whole tables, never a ledger
// row, and keeps what a lease or hold still needs; records of any time land (a day table, or the
// DEFAULT partition until its day table is made); the migration converts a table with records
// and keeps every one and the rollups exact; a retried sink batch is still refused.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import type { BatchResult, Db, Statement } from '../../src/db/database.ts';
import { isUniqueViolation } from '../../src/db/database.ts';
import { migrate } from '../../src/db/migrate.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import { openPostgres } from '../../src/db/dialects/postgres.ts';
import { createGateway } from '../../src/kernel/gateway.ts';
import { silentLogger } from '../../src/kernel/log.ts';
import pg from 'pg';
import { BILLING, METERING, type MeterRecord } from '../../src/kernel/metering.ts';
import { stockServices } from '../../src/services/index.ts';
import type { LeaseBilling } from '../../src/services/balance/lease.ts';
import type { UsageBuffer } from '../../src/services/usage/index.ts';
import { DAY_MS, ensurePartitions, partitionName } from '../../src/services/usage/partitions.ts';
import { rollupStatements } from '../../src/services/usage/rollup.ts';
import { insertStatements, toRow } from '../../src/services/usage/sink.ts';
import { createTestDatabase, pgSkipReason } from '../helpers/postgres.ts';
import { meterRecord, strandedLeaseAndHold, sweptAt } from './record.ts';

const skip = await pgSkipReason();
if (skip) console.log(`# ${skip}`);

const NOW = Date.now();
const TODAY = Math.floor(NOW / DAY_MS) * DAY_MS;
const ADMIN = 'admin-partitions-test';

const rec = (i: number, at: number, extra: Partial<MeterRecord> = {}): MeterRecord => meterRecord(`req_${at}_${i}`, at, extra);

async function world(env: Record<string, string> = {}, wrap: (db: Db) => Db = (db) => db) {
  const { url } = await createTestDatabase();
  const db = openPostgres(url);
  const logs: { level: string; msg: string }[] = [];
  const gw = createGateway({ db: wrap(db), services: stockServices, logger: (level, msg) => logs.push({ level, msg }), processEnv: { GATEWAY_ADMIN_SECRET_KEY: ADMIN, USAGE_FLUSH_MS: '60000', ...env }, config: { gracefulStop: true } });
  await gw.init();
  const sink = gw.context.use<UsageBuffer>(METERING)!;
  const q = async <T>(text: ReturnType<typeof sql<T>>) => (await text.execute(db.kysely)).rows;
  const count = async (table = 'usage', where = sql`1 = 1`) => Number((await q(sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql.table(table)} WHERE ${where}`))[0].n);
  const exists = async (name: string) => (await q(sql<{ r: string | null }>`SELECT to_regclass(${name})::text AS r`))[0].r !== null;
  const where = async (requestId: string) => (await q(sql<{ t: string }>`SELECT tableoid::regclass::text AS t FROM usage WHERE request_id = ${requestId}`)).map((r) => r.t);
  const post = (path: string, body: unknown) =>
    gw.fetch(new Request(`http://x${path}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }));
  return {
    db, url, logs, gw, sink, q, count, exists, where,
    async fund(user: string, credits: number) {
      const r = await post('/v1/balance/adjust', { city_id: 'c', user_id: user, credits, reason: 'fund', idempotency_key: `fund-${user}` });
      assert.equal(r.status, 200, await r.text());
    },
    async close() {
      await gw.stop();
      await db.close();
    },
  };
}

test('PostgreSQL: a pass drops the day tables older than USAGE_RETENTION_DAYS whole, never a ledger row; the rollups keep their totals', { skip }, async () => {
  const w = await world({ USAGE_RETENTION_DAYS: '30' });
  try {
    await ensurePartitions(w.db, NOW - 50 * DAY_MS, NOW);
    await w.fund('u', 1_000_000);
    for (let i = 0; i < 25; i++) w.sink.record(rec(i, NOW - 45 * DAY_MS - i));
    for (let i = 0; i < 3; i++) w.sink.record(rec(i, NOW - 31 * DAY_MS - 2 * DAY_MS - i));
    for (let i = 0; i < 10; i++) w.sink.record(rec(i, NOW - 29 * DAY_MS - i));
    for (let i = 0; i < 5; i++) w.sink.record(rec(i, NOW - i));
    await w.sink.flush();
    const old = partitionName(NOW - 45 * DAY_MS);
    assert.ok(await w.exists(old));
    assert.equal(await w.count(old), 25, 'the records sit in their day table');
    assert.equal(await w.count('usage_default'), 0);
    const ledger = async () => (await w.q(sql<{ n: number; s: number }>`SELECT COUNT(*) AS n, SUM(credits) AS s FROM ledger`))[0];
    const before = await ledger();

    await w.gw.maintain();
    assert.equal(await w.exists(old), false, 'the day 45 days ago is gone as a table');
    assert.equal(await w.exists(partitionName(NOW - 33 * DAY_MS)), false);
    assert.ok(await w.exists(partitionName(NOW - 29 * DAY_MS)), 'a day younger than the setting stays');
    assert.ok(await w.exists(partitionName(NOW - 30 * DAY_MS)), 'the day that holds the cutoff stays until it is all older than the setting');
    assert.equal(await w.count(), 15, 'the 10 + 5 younger records are kept');
    assert.deepEqual({ ...(await ledger()) }, { ...before }, 'no ledger row deleted');
    const calls = await w.q(sql<{ c: number }>`SELECT SUM(calls) AS c FROM usage_hourly WHERE city_id = 'c'`);
    assert.equal(Number(calls[0].c), 43, 'the rollup still counts the pruned calls');
    for (let d = -1; d <= 7; d++) assert.ok(await w.exists(partitionName(NOW + d * DAY_MS)), `the day table of today ${d >= 0 ? '+' : ''}${d} exists`);
  } finally {
    await w.close();
  }
});

test('PostgreSQL: a lease-recovery record and an open hold\'s record survive the drop of their day, until they are no longer needed', { skip }, async () => {
  const w = await world({ USAGE_RETENTION_DAYS: '30', BALANCE_LEASE_TTL_SECONDS: '60' });
  try {
    await ensurePartitions(w.db, NOW - 41 * DAY_MS, NOW);
    await w.fund('u', 10_000);
    const old = NOW - 40 * DAY_MS;
    await strandedLeaseAndHold(w.db, old - 1000, NOW); // its lease was taken a second before its calls
    for (let i = 0; i < 3; i++) w.sink.record(rec(i, old - i, { lease_owner: 'dead-proc', request_id: `req_lease_${i}` }));
    w.sink.record(rec(9, old - 9, { request_id: 'req_held' }));
    w.sink.record(rec(10, old - 10, { request_id: 'req_plain' }));
    await w.sink.flush();
    const day = partitionName(old);
    assert.equal(await w.count(day), 5);

    await w.gw.maintain();
    assert.equal(await w.exists(day), false, 'the day table is dropped');
    assert.deepEqual(await w.where('req_lease_0'), ['usage_default'], 'a record the open lease needs moved to the DEFAULT partition');
    assert.equal(await w.count('usage', sql`lease_owner = 'dead-proc'`), 3);
    assert.deepEqual(await w.where('req_held'), ['usage_default'], 'kept: its hold is open');
    assert.deepEqual(await w.where('req_plain'), [], 'an ordinary old record is gone');

    await (w.gw.context.use(BILLING) as LeaseBilling).sweep(sweptAt(NOW));
    const charged = await w.q(sql<{ s: number }>`SELECT SUM(credits) AS s FROM ledger WHERE kind = 'charge' AND ref = 'dead-proc'`);
    assert.equal(Number(charged[0].s), -300, 'the sweeper charged the dead process from the kept records');
    await w.db.batch([sql`UPDATE holds SET status = 'settled', closed_at = ${NOW} WHERE hold_id = 'h1'`.compile(w.db.kysely)]);

    await w.gw.maintain();
    assert.equal(await w.count('usage', sql`created_at < ${NOW - 30 * DAY_MS}`), 0, 'no longer needed: pruned');
    const bal = await w.q(sql<{ credits: number }>`SELECT credits FROM balances WHERE city_id = 'c' AND user_id = 'u'`);
    assert.equal(Number(bal[0].credits), 10_000 - 300, 'the charge stays: the ledger is never pruned');
  } finally {
    await w.close();
  }
});

test('PostgreSQL: records land at day boundaries, far in the past and far in the future; a day table made later takes its records over', { skip }, async () => {
  const w = await world();
  try {
    const at = [TODAY - 1, TODAY, TODAY + DAY_MS - 1, TODAY + DAY_MS];
    at.forEach((t, i) => w.sink.record(rec(i, t, { request_id: `edge_${i}` })));
    const past = Date.UTC(1999, 11, 31, 23, 59, 59, 999);
    const future = Date.UTC(2100, 0, 1);
    w.sink.record(rec(0, past, { request_id: 'past' }));
    w.sink.record(rec(0, future, { request_id: 'future' }));
    await w.sink.flush();
    assert.deepEqual(await w.where('edge_0'), [partitionName(TODAY - 1)], 'the last millisecond of yesterday');
    assert.deepEqual(await w.where('edge_1'), [partitionName(TODAY)], 'the first of today');
    assert.deepEqual(await w.where('edge_2'), [partitionName(TODAY)], 'the last of today');
    assert.deepEqual(await w.where('edge_3'), [partitionName(TODAY + DAY_MS)], 'the first of tomorrow');
    assert.deepEqual(await w.where('past'), ['usage_default'], 'no day table for 1999-12-31: the DEFAULT partition');
    assert.deepEqual(await w.where('future'), ['usage_default']);

    await ensurePartitions(w.db, future, future);
    assert.deepEqual(await w.where('future'), ['usage_p21000101'], 'the new day table took its record from the DEFAULT partition');
    w.sink.record(rec(1, future + 5, { request_id: 'future-2' }));
    await w.sink.flush();
    assert.deepEqual(await w.where('future-2'), ['usage_p21000101']);
    const list = await w.gw.fetch(new Request(`http://x/v1/usage/list?from=${future}`, { headers: { authorization: `Bearer ${ADMIN}` } }));
    assert.deepEqual(((await list.json()) as { items: { request_id: string }[] }).items.map((x) => x.request_id), ['future-2', 'future']);
  } finally {
    await w.close();
  }
});

test('PostgreSQL: a retried sink batch (its commit answer lost) is refused by UNIQUE (usage_id, created_at): each record and its rollup once', { skip }, async () => {
  let loseNextAnswer = false;
  const lossy = (db: Db): Db => ({
    ...db,
    kysely: db.kysely,
    dialect: db.dialect,
    async batch(queries: readonly Statement[]): Promise<BatchResult[]> {
      const r = await db.batch(queries);
      // the sink's batch (the token limits write their own meanwhile)
      if (loseNextAnswer && queries.some((q) => /insert into "usage"/i.test(('compile' in q ? q.compile() : q).sql))) {
        loseNextAnswer = false;
        throw new Error('Connection terminated unexpectedly');
      }
      return r;
    },
  });
  const w = await world({}, lossy);
  try {
    // a batch over two days: its records sit in two day tables
    for (let i = 0; i < 3; i++) w.sink.record(rec(i, TODAY - 1 - i, { request_id: `r${i}` }));
    for (let i = 3; i < 6; i++) w.sink.record(rec(i, TODAY + i, { request_id: `r${i}` }));
    loseNextAnswer = true;
    await w.sink.flush();
    assert.equal(await w.count(), 6, 'the first attempt committed');
    assert.equal(w.sink.pending, 6, 'but the sink does not know it');
    w.sink.record(rec(7, TODAY + 7, { request_id: 'r7' }));
    await w.sink.flush();
    assert.equal(w.sink.pending, 0);
    const ids = (await w.q(sql<{ request_id: string }>`SELECT request_id FROM usage ORDER BY request_id`)).map((r) => r.request_id);
    assert.deepEqual(ids, ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r7'], 'each record once, none lost');
    const calls = await w.q(sql<{ c: number }>`SELECT SUM(calls) AS c FROM usage_hourly`);
    assert.equal(Number(calls[0].c), 7, 'the rollup counts each record once');

    // the very same rows again, straight: refused whole
    const rows = (await w.q(sql<Record<string, unknown>>`SELECT * FROM usage WHERE request_id IN ('r0', 'r4')`)).map((r) => {
      const { seq: _seq, ...rest } = r;
      return { ...rest, created_at: Number(rest.created_at) } as never;
    });
    await assert.rejects(w.db.batch([...insertStatements(w.db, rows), ...rollupStatements(w.db, rows)]), (e) => isUniqueViolation(e));
    assert.equal(await w.count(), 7);
  } finally {
    await w.close();
  }
});

test('PostgreSQL: migration 088 converts a usage table with records: every record and the rollups kept exact, new records after them', { skip }, async () => {
  const { url } = await createTestDatabase();
  const db = openPostgres(url);
  try {
    await migrate(db, migrations.filter((m) => m.name < '088'));
    assert.equal((await sql<{ k: string }>`SELECT relkind AS k FROM pg_class WHERE oid = to_regclass('usage')`.execute(db.kysely)).rows[0].k, 'r');
    // 3,000 records over 12 days, 3 cities, 2 models, through the sink's own statements
    const rows = Array.from({ length: 3000 }, (_, i) =>
      toRow(rec(i, NOW - (i % 12) * DAY_MS - i, { city_id: `c${i % 3}`, model: `m${i % 2}`, user_id: `u${i % 7}`, credits: i, status: i % 50 === 0 ? 'error' : 'ok' })),
    );
    // the sink's rows without the columns later migrations add (092: key_id), as records written before 088 were
    const old = rows.map(({ key_id: _, ...r }) => r);
    for (let i = 0; i < rows.length; i += 500) await db.batch([db.kysely.insertInto('usage').values(old.slice(i, i + 500)), ...rollupStatements(db, rows.slice(i, i + 500))]);
    const q = async <T>(text: ReturnType<typeof sql<T>>) => (await text.execute(db.kysely)).rows;
    const digest = () => q(sql<{ n: number; h: string; m: number }>`SELECT COUNT(*) AS n, md5(string_agg(u::text, '|' ORDER BY seq)) AS h, MAX(seq) AS m FROM usage u`);
    const rollups = async () => {
      const out: Record<string, unknown> = {};
      for (const t of ['usage_hourly', 'usage_daily', 'usage_daily_city', 'usage_daily_model']) {
        out[t] = (await q(sql<{ h: string }>`SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) AS h FROM ${sql.table(t)} r`))[0].h;
      }
      return out;
    };
    const before = (await digest())[0];
    const rollupsBefore = await rollups();
    assert.equal(Number(before.n), 3000);

    // up to 092 (which adds a column: the rows' text would change), then the rest
    const upTo = (m: { name: string }) => m.name >= '088' && m.name < '092';
    assert.deepEqual(await migrate(db, migrations.filter((m) => m.name < '092')), migrations.filter(upTo).map((m) => m.name));
    assert.equal((await sql<{ k: string }>`SELECT relkind AS k FROM pg_class WHERE oid = to_regclass('usage')`.execute(db.kysely)).rows[0].k, 'p', 'partitioned');
    assert.deepEqual({ ...(await digest())[0] }, { ...before }, 'every record, byte for byte');
    assert.deepEqual(await rollups(), rollupsBefore, 'the rollups untouched');
    const raw = await q(sql<{ day: string; city_id: string; model: string; calls: number; credits: number }>`SELECT to_char(to_timestamp(created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, city_id, model, COUNT(*) AS calls, SUM(credits) AS credits FROM usage GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`);
    const daily = await q(sql<{ day: string; city_id: string; model: string; calls: number; credits: number }>`SELECT day, city_id, model, calls, credits FROM usage_daily ORDER BY 1, 2, 3`);
    assert.deepEqual(daily.map((r) => ({ ...r, calls: Number(r.calls), credits: Number(r.credits) })), raw.map((r) => ({ ...r, calls: Number(r.calls), credits: Number(r.credits) })), 'rollups = raw sums');
    const days = new Set(rows.map((r) => partitionName(r.created_at)));
    for (let d = -1; d <= 7; d++) days.add(partitionName(NOW + d * DAY_MS));
    const tables = (await q(sql<{ name: string }>`SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'usage'::regclass`)).map((r) => r.name);
    assert.deepEqual(tables.sort(), [...days, 'usage_default'].sort(), 'a day table per day with records, yesterday to today + 7, and DEFAULT');
    for (const d of days) assert.ok(tables.includes(d));
    assert.deepEqual(await migrate(db), migrations.filter((m) => m.name >= '092').map((m) => m.name));
    const indexes = (await q(sql<{ name: string; def: string }>`SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'usage' ORDER BY 1`)).map((r) => r.name);
    assert.deepEqual(indexes, ['usage_by_key', 'usage_by_user', 'usage_city_seq', 'usage_model_seq', 'usage_pkey', 'usage_request', 'usage_time_seq', 'usage_usage_id_key', 'usage_user_seq']);
    for (const t of [partitionName(NOW), 'usage_default']) {
      const n = await q(sql<{ n: number }>`SELECT COUNT(*) AS n FROM pg_indexes WHERE tablename = ${t}`);
      assert.equal(Number(n[0].n), 9, `${t} has every index (a list page reads them per day table)`);
    }

    // a gateway on it writes new records after the old ones
    const gw = createGateway({ db, services: stockServices, logger: silentLogger, processEnv: { GATEWAY_ADMIN_SECRET_KEY: ADMIN } });
    await gw.init();
    const sink = gw.context.use<UsageBuffer>(METERING)!;
    sink.record(rec(1, NOW, { request_id: 'after' }));
    await sink.flush();
    const after = await q(sql<{ seq: number }>`SELECT seq FROM usage WHERE request_id = 'after'`);
    assert.ok(Number(after[0].seq) > Number(before.m), 'its seq continues after the copied ones');
    const list = await gw.fetch(new Request('http://x/v1/usage/list?limit=1', { headers: { authorization: `Bearer ${ADMIN}` } }));
    assert.equal(((await list.json()) as { items: { request_id: string }[] }).items[0].request_id, 'after');
    await gw.stop();
  } finally {
    await db.close();
  }
});

test('PostgreSQL: usage/list pages over the day tables (read in time windows) give every record once, newest first, with from/to', { skip }, async () => {
  const w = await world();
  try {
    await ensurePartitions(w.db, NOW - 70 * DAY_MS, NOW);
    const ages = [-3, 0, 0.5, 2, 5, 9, 20, 40, 65, 400]; // days ago (−3: in the future; 400: the DEFAULT partition)
    ages.forEach((a, i) => w.sink.record(rec(i, Math.round(NOW - a * DAY_MS), { request_id: `age_${a}` })));
    await w.sink.flush();
    const all = async (query: string) => {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const r = await w.gw.fetch(new Request(`http://x/v1/usage/list?limit=3&${query}${cursor ? `&cursor=${cursor}` : ''}`, { headers: { authorization: `Bearer ${ADMIN}` } }));
        assert.equal(r.status, 200);
        const body = (await r.json()) as { items: { request_id: string }[]; next_cursor: string | null };
        seen.push(...body.items.map((x) => x.request_id));
        cursor = body.next_cursor;
      } while (cursor);
      return seen;
    };
    assert.deepEqual(await all('city_id=c'), ages.map((a) => `age_${a}`));
    assert.deepEqual(await all(`from=${NOW - 30 * DAY_MS}&to=${NOW - DAY_MS}`), ['age_2', 'age_5', 'age_9', 'age_20']);
  } finally {
    await w.close();
  }
});

test('PostgreSQL: a day table that long queries hold past the lock timeout is left for the next pass, which drops it', { skip }, async () => {
  const w = await world({ USAGE_RETENTION_DAYS: '30' });
  const blocker = new pg.Client({ connectionString: w.url });
  try {
    await ensurePartitions(w.db, NOW - 41 * DAY_MS, NOW);
    w.sink.record(rec(0, NOW - 40 * DAY_MS, { request_id: 'old' }));
    await w.sink.flush();
    const day = partitionName(NOW - 40 * DAY_MS);
    // a long report holding usage (an open transaction that read it)
    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query('SELECT COUNT(*) FROM usage');
    await w.gw.maintain();
    assert.ok(await w.exists(day), 'not dropped while held');
    assert.ok(w.logs.some((l) => l.level === 'warn' && /day table was busy/.test(l.msg)), 'a warning, not a failed pass');
    assert.ok(!w.logs.some((l) => l.level === 'error'));
    await blocker.query('COMMIT');
    await w.gw.maintain();
    assert.equal(await w.exists(day), false, 'the next pass drops it');
    assert.deepEqual(await w.where('old'), []);
  } finally {
    await blocker.end().catch(() => {});
    await w.close();
  }
});
