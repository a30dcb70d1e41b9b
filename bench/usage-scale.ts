// Usage at scale (issue 27; not in npm test, not in `npm run bench`): fills --rows usage
// records (default 50,000,000) across 90 days, 200 cities, 100,000 users and 50 models, with
// their rollups, on SQLite and/or PostgreSQL, then measures what an operator's reports cost:
//
//   - usage/summary and usage/stats (the console overview's four queries among them),
//   - the first page of usage/list, unfiltered and filtered by city, city+user, user, model,
//   - charged chat/completions p99 under load, without and while a retention pass prunes a day,
//   - the prune of one day at full speed, and a retention pass (--pass-days: the records kept,
//     default 84, so the pass prunes the 3 oldest days left) with the database size before and
//     after. On PostgreSQL the records sit in daily partitions (migration 088): the fill makes
//     the 90 days' tables first, and a pass drops whole days.
//
//   node bench/usage-scale.ts --rows 1000000 --db sqlite           # develop at a small size
//   node bench/usage-scale.ts --db sqlite,postgres                  # 50M on both (hours, ~30 GB each)
//   USAGE_SCALE_PG_URL=postgres://postgres@127.0.0.1:5432/postgres  # the server (a fresh database is made and dropped)
//   USAGE_SCALE_DIR=/path                                           # where the SQLite file goes (default: a temp dir)
//   --fill-only --keep, then --reuse <file|url> --db <one>          # fill in the background, measure later on a quiet machine
//                                                                   # (the same UTC day: the records' days are counted from now)
//   --p99-days N                                                    # the first p99 run's retention (default 88; one less each
//                                                                   # run): lower it to measure again a database pruned before
//
// The fill is bulk SQL generated inside the database, not the sink (the sink's batches would
// take hours at 50M): one INSERT … SELECT per million records (SQLite: a recursive CTE, with
// journal_mode=OFF, synchronous=OFF and a 2 GB page cache for the fill; PostgreSQL:
// generate_series, synchronous_commit=off and 1 GB maintenance_work_mem per statement) with the
// secondary indexes dropped and rebuilt after, then VACUUM ANALYZE on PostgreSQL (what
// autovacuum would do to an insert-only table), and the rollups filled by migration 084's
// backfill, the same sums the sink's batches keep. Cities, users and
// models are skewed (a few big cities and popular models, as in real traffic): city = ⌊200·x³⌋,
// model = ⌊50·y²⌋ for pseudo-random x, y in [0, 1); 500 users per city; 2 % errors.
import { mkdtempSync, rmSync, statSync, existsSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import type { Db } from '../src/db/database.ts';
import { openNodeSqlite } from '../src/db/dialects/node-sqlite.ts';
import { createGateway, type Gateway } from '../src/kernel/gateway.ts';
import { silentLogger } from '../src/kernel/log.ts';
import { stockServices } from '../src/services/index.ts';
import { prune } from '../src/services/usage/retention.ts';
import { BUCKET_COLUMNS, rollupMigration, SUMS } from '../src/services/usage/rollup.ts';
import { ensurePartitions } from '../src/services/usage/partitions.ts';
import { runLoad } from './load.ts';
import { answersHttp, freePort, spawnServer } from './processes.ts';
import { startStubProcess } from './stub.ts';
import { chatBodies } from './chat-bodies.ts';

const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
};
const ROWS = Number(arg('--rows') ?? 50_000_000);
const DBS = (arg('--db') ?? 'sqlite,postgres').split(',');
const LOAD_S = Number(arg('--load-seconds') ?? 20);
const PASS_DAYS = Number(arg('--pass-days') ?? 84);
const RUNS = Number(arg('--p99-runs') ?? 2);
const FILL_ONLY = process.argv.includes('--fill-only');
const P99_ONLY = process.argv.includes('--p99-only'); // only the p99 runs (on a --reuse'd database, say)
const REUSE = arg('--reuse'); // a database a `--fill-only --keep` run left (its file or URL), measured without a fill, kept
const KEEP = process.argv.includes('--keep') || REUSE !== undefined; // leave the database (to look into it); drop it yourself
const DAYS = 90;
const P99_DAYS = Number(arg('--p99-days') ?? DAYS - 2); // the first prune run's retention (then one day less each run)
const DAY = 86_400_000;
const CHUNK = 1_000_000;
const NOW = Date.now();
const START = Math.floor((NOW - DAYS * DAY) / DAY) * DAY + DAY; // day 0 starts at a UTC midnight, 89 days ago
let ADMIN = `bench-admin-${crypto.randomUUID()}`; // a reused database keeps its own (read below)
const MODEL = 'gpt-4o-mini';


const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MB`;

/** The SELECT of `n` records from `from` (dialect-specific generator, same pseudo-random columns). */
function fillSql(dialect: 'sqlite' | 'postgres', from: number, n: number): string {
  const i = dialect === 'sqlite' ? 'i' : 'g.i';
  // three pseudo-random 31-bit numbers per row (LCG steps of i)
  const r1 = `((${i} * 1103515245 + 12345) % 2147483648)`;
  const r2 = `((${i} * 22695477 + 1) % 2147483648)`;
  const r3 = `((${i} * 134775813 + 7) % 2147483648)`;
  const x = `(${r1} / 2147483648.0)`;
  const y = `(${r2} / 2147483648.0)`;
  const floor = (e: string) => (dialect === 'sqlite' ? `CAST(${e} AS INTEGER)` : `floor(${e})::bigint`);
  const city = floor(`200 * ${x} * ${x} * ${x}`);
  const model = floor(`50 * ${y} * ${y}`);
  const user = `(${r3} % 500)`;
  const inTok = `(100 + ${r3} % 900)`;
  const outTok = `(20 + ${r1} % 300)`;
  const id = dialect === 'sqlite' ? `printf('use_%010d', ${i})` : `'use_' || lpad(${i}::text, 10, '0')`;
  const cols = `usage_id, request_id, city_id, user_id, identity, model, mode, status, error_code, input_tokens, output_tokens, cached_tokens,
    images, seconds, credits, base_credits, duration_ms, overhead_ms, created_at, upstream, attempts`;
  const select = `SELECT ${id}, 'req_' || ${i}, 'city-' || ${city}, 'user-' || ${city} || '-' || ${user}, 'user', 'model-' || ${model}, 'compat',
      CASE WHEN ${r2} % 50 = 0 THEN 'error' ELSE 'ok' END, CASE WHEN ${r2} % 50 = 0 THEN 'upstream_error' ELSE NULL END,
      ${inTok}, ${outTok}, 0, 0, 0, ${inTok} + 2 * ${outTok}, ${inTok} + ${outTok}, 300 + ${r3} % 2000, 0.2 + (${r1} % 1000) / 500.0,
      ${START} + (${i} * ${DAYS * DAY}) / ${ROWS}, 'up-' || (${model} % 5), 1`;
  if (dialect === 'sqlite') {
    return `INSERT INTO usage (${cols}) WITH RECURSIVE n(i) AS (SELECT ${from} UNION ALL SELECT i + 1 FROM n WHERE i < ${from + n - 1}) ${select} FROM n`;
  }
  return `INSERT INTO usage (${cols}) ${select} FROM generate_series(${from}::bigint, ${from + n - 1}::bigint) AS g(i)`;
}

async function exec(db: Db, text: string) {
  await sql.raw(text).execute(db.kysely);
}

/** A bulk statement: on PostgreSQL in a transaction of its own with settings for bulk work. */
async function bulk(db: Db, text: string) {
  if (db.dialect !== 'postgres') return exec(db, text);
  await db.batch([
    sql`SET LOCAL synchronous_commit = off`,
    sql`SET LOCAL maintenance_work_mem = '1GB'`,
    sql`SET LOCAL work_mem = '256MB'`,
    sql.raw(text),
  ].map((q) => q.compile(db.kysely)));
}

async function dbSize(db: Db, file: string | null): Promise<number> {
  if (file) {
    await exec(db, 'PRAGMA wal_checkpoint(TRUNCATE)');
    return statSync(file).size + (existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0);
  }
  const r = await sql<{ s: string }>`SELECT pg_database_size(current_database()) AS s`.execute(db.kysely);
  return Number(r.rows[0].s);
}

async function fill(db: Db, dialect: 'sqlite' | 'postgres') {
  const t = performance.now();
  // the secondary indexes of the records and the hourly rollup, dropped for the fill and rebuilt after (a sort each)
  const indexes = (
    await sql<{ name: string; def: string }>`${sql.raw(
      dialect === 'sqlite'
        ? `SELECT name, sql AS def FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('usage', 'usage_hourly') AND sql IS NOT NULL`
        : `SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename IN ('usage', 'usage_hourly') AND indexdef NOT LIKE '%UNIQUE%'`,
    )}`.execute(db.kysely)
  ).rows;
  for (const { name } of indexes) await exec(db, `DROP INDEX IF EXISTS ${name}`);
  if (dialect === 'sqlite') {
    // the fill only: no journal, no fsync, a big page cache (a crash would lose the bench's file)
    for (const p of ['journal_mode = OFF', 'synchronous = OFF', 'cache_size = -2000000', 'threads = 2']) await exec(db, `PRAGMA ${p}`);
  } else {
    await ensurePartitions(db, START, START + (DAYS - 1) * DAY); // the 90 days' tables, made ahead as a live gateway does
  }
  // the hourly rollup: migration 084's backfill of it, run per chunk on the chunk's records
  // (seq range) as an upsert, so each GROUP BY sorts one chunk (an hour on a chunk's edge is
  // added to by both); the daily rollups are then the migration's sums of the hourly one
  const texts = rollupMigration().map((m) => (typeof m === 'string' ? m : dialect === 'postgres' ? m.postgres : m.sqlite));
  const hourlyText = texts.find((x) => /^\s*INSERT INTO usage_hourly/i.test(x))!;
  const set = [...SUMS, ...BUCKET_COLUMNS].map((c) => `${c} = usage_hourly.${c} + excluded.${c}`);
  set.push(`overhead_max = ${dialect === 'postgres' ? 'GREATEST' : 'MAX'}(usage_hourly.overhead_max, excluded.overhead_max)`);
  const hourlyOf = (lo: number, hi: number) => {
    const t = hourlyText.replace(/FROM usage\) r\s+GROUP BY/, `FROM usage WHERE seq > ${lo} AND seq <= ${hi}) r WHERE true GROUP BY`);
    if (t === hourlyText) throw new Error('the hourly backfill changed shape: update the bench');
    return `${t} ON CONFLICT (hour, city_id, model, mode, status, upstream) DO UPDATE SET ${set.join(', ')}`;
  };
  await exec(db, 'DELETE FROM usage_hourly');
  const maxSeq = async () => Number((await sql<{ m: number | null }>`SELECT MAX(seq) AS m FROM usage`.execute(db.kysely)).rows[0].m ?? 0);
  let tRollups = 0;
  for (let from = 0; from < ROWS; from += CHUNK) {
    const lo = await maxSeq();
    await bulk(db, fillSql(dialect, from, Math.min(CHUNK, ROWS - from)));
    const tr = performance.now();
    await bulk(db, hourlyOf(lo, await maxSeq()));
    tRollups += performance.now() - tr;
    if ((from / CHUNK) % 5 === 4) process.stdout.write(`  ${((from + CHUNK) / 1e6).toFixed(0)}M records (${((performance.now() - t) / 1000).toFixed(0)} s, of which hourly rollup ${(tRollups / 1000).toFixed(0)} s)\n`);
  }
  const tIdx = performance.now();
  // pg_indexes spells a partitioned index `ON ONLY usage` (the parent alone): rebuilt for every day table
  for (const { def } of indexes) await bulk(db, def.replace(' ON ONLY ', ' ON '));
  if (dialect === 'postgres') await exec(db, 'VACUUM ANALYZE usage');
  const tRoll = performance.now();
  for (const t of ['usage_daily', 'usage_daily_city', 'usage_daily_model']) await exec(db, `DELETE FROM ${t}`);
  for (const text of texts) {
    if (/^\s*INSERT INTO usage_daily/i.test(text)) await bulk(db, text);
  }
  await exec(db, 'ANALYZE');
  if (dialect === 'sqlite') for (const p of ['journal_mode = WAL', 'synchronous = NORMAL', 'cache_size = -2000']) await exec(db, `PRAGMA ${p}`);
  const rollup = await sql<{ h: number; d: number }>`SELECT (SELECT COUNT(*) FROM usage_hourly) AS h, (SELECT COUNT(*) FROM usage_daily) AS d`.execute(db.kysely);
  say(
    `fill: ${(ROWS / 1e6).toFixed(1)}M records in ${((tIdx - t - tRollups) / 1000).toFixed(0)} s and their hourly rollup ${(tRollups / 1000).toFixed(0)} s, ` +
      `indexes${dialect === 'postgres' ? ' and VACUUM ANALYZE' : ''} ${((tRoll - tIdx) / 1000).toFixed(0)} s, daily rollups ${((performance.now() - tRoll) / 1000).toFixed(0)} s ` +
      `(${Number(rollup.rows[0].h).toLocaleString('en-US')} hourly rows, ${Number(rollup.rows[0].d).toLocaleString('en-US')} daily rows)`,
  );
}

/** Median and max of `runs` timed GETs through the gateway's fetch handler (after one warm-up). */
async function timed(gw: Gateway, label: string, path: string, limitMs: number, runs = 7) {
  const get = async () => {
    const res = await gw.fetch(new Request(`http://bench${path}`, { headers: { authorization: `Bearer ${ADMIN}` } }));
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ items: unknown[] }>;
  };
  await get();
  const times: number[] = [];
  let items = 0;
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    items = (await get()).items.length;
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const med = times[Math.floor(runs / 2)];
  say(`| ${label} | ${med.toFixed(1)} | ${times[runs - 1].toFixed(1)} | ${items} | ${med <= limitMs ? 'ok' : `over ${limitMs}`} |`);
}

async function reports(gw: Gateway) {
  const day = (d: number) => new Date(START + d * DAY).toISOString().slice(0, 10);
  const last = DAYS - 1;
  say('| query | median ms | max ms | items | target |');
  say('|---|---:|---:|---:|---|');
  await timed(gw, 'summary, 30 days, city-0 (the biggest)', `/v1/usage/summary?city_id=city-0&from=${day(last - 29)}&to=${day(last)}`, 50);
  await timed(gw, 'summary, 30 days, city-150', `/v1/usage/summary?city_id=city-150&from=${day(last - 29)}&to=${day(last)}`, 50);
  await timed(gw, 'summary, 7 days, all cities (first page: 1,000 items)', `/v1/usage/summary?from=${day(last - 6)}&to=${day(last)}`, 50);
  await timed(gw, 'summary, 7 days, all cities (a page of 10,000)', `/v1/usage/summary?limit=10000&from=${day(last - 6)}&to=${day(last)}`, 50);
  await timed(gw, 'stats totals (group=), 90 days', `/v1/usage/stats?group=&from=${day(0)}&to=${day(last)}`, 50);
  await timed(gw, 'stats group=day, 30 days', `/v1/usage/stats?group=day&from=${day(last - 29)}&to=${day(last)}`, 50);
  for (const g of ['city', 'model', 'day,city', 'day,model']) {
    await timed(gw, `overview: stats group=${g}, 7 days`, `/v1/usage/stats?group=${g}&from=${day(last - 6)}&to=${day(last)}`, 50);
  }
  await timed(gw, 'overview: stats group=day,model, 7 days, city-0', `/v1/usage/stats?group=day,model&city_id=city-0&from=${day(last - 6)}&to=${day(last)}`, 50);
  await timed(gw, 'list, first page, no filter', '/v1/usage/list?limit=50', 20);
  await timed(gw, 'list, first page, city', '/v1/usage/list?limit=50&city_id=city-150', 20);
  await timed(gw, 'list, first page, city + user', '/v1/usage/list?limit=50&city_id=city-0&user_id=user-0-7', 20);
  await timed(gw, 'list, first page, user (no city)', '/v1/usage/list?limit=50&user_id=user-0-7', 20);
  await timed(gw, 'list, first page, model', '/v1/usage/list?limit=50&model=model-40', 20);
}

/** Charged chat/completions p99 against a gateway process on this database: without, then during a retention pass. */
async function p99UnderPrune(db: Db, env: Record<string, string>) {
  // records past a retention setting: counted before and after a run, so a run says what its pass deleted meanwhile
  const past = async (cutoff: number) => Number((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM usage WHERE created_at < ${cutoff}`.execute(db.kysely)).rows[0].n);
  const stub = await startStubProcess();
  const body = chatBodies(MODEL).json;
  const run = async (label: string, extra: Record<string, string>) => {
    // counted before the process (and its first pass) starts; 0 days: nothing is past
    const cutoff = extra.USAGE_RETENTION_DAYS === '0' ? 0 : Date.now() - Number(extra.USAGE_RETENTION_DAYS) * DAY;
    const before = await past(cutoff);
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const proc = await spawnServer({
      name: `usage-scale-${label}`,
      gateway: true,
      args: [join(import.meta.dirname, '../src/cli/main.ts'), 'serve'],
      cwd: tmpdir(),
      env: {
        NODE_ENV: 'production',
        HOST: '127.0.0.1',
        PORT: String(port),
        GATEWAY_ADMIN_SECRET_KEY: ADMIN,
        TEXTPROVIDER_API_KEY: stub.apiKey,
        TEXTPROVIDER_BASE_URL: stub.url,
        TEXTPROVIDER_MODELS: MODEL,
        MODEL_PRICES: JSON.stringify({ [MODEL]: { input_per_mtok: 150_000, output_per_mtok: 600_000 } }),
        ...env,
        ...extra,
      },
      ready: () => answersHttp(`${origin}/health`),
      timeoutMs: 600_000,
    });
    try {
      const post = (path: string, b: unknown) =>
        fetch(origin + path, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(b) }).then((r) => r.json() as Promise<any>);
      await post('/v1/cities/create', { name: 'bench', city_id: 'bench' });
      const token = (await post('/v1/cities/tokens/apply', { city_id: 'bench', user_id: 'bench-user' })).user_token as string;
      await post('/v1/balance/adjust', { city_id: 'bench', user_id: 'bench-user', credits: 1e12, reason: 'bench', idempotency_key: `bench-${label}` });
      const t = performance.now();
      const r = await runLoad({ url: `${origin}/v1/ai/chat/completions`, headers: { authorization: `Bearer ${token}` }, body, connections: 8, durationSec: LOAD_S });
      const logs = proc.logTail();
      const pass = /usage retention pass[^\n]*/.exec(logs)?.[0];
      const pruned = before - (await past(cutoff));
      // (the pass's own log line, when it is still in the log's tail: the request lines push it out)
      const how = !cutoff ? 'none (retention 0)' : `${pruned.toLocaleString('en-US')} records pruned in the ${((performance.now() - t) / 1000).toFixed(0)} s${pass ? `: ${pass.slice(0, 120)}` : ''}`;
      say(`| ${label} | ${r.rps.toFixed(0)} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${r.errors} | ${how} |`);
      return r.p99Ms;
    } finally {
      await proc.stop();
    }
  };
  say('| case | req/s | p50 ms | p99 ms | errors | retention pass |');
  say('|---|---:|---:|---:|---:|---|');
  // alternated, twice, so drift in the machine's load hits both alike; each prune run has a
  // day past retention (89, then 88 days), which its process's first pass (2 s after boot) prunes
  const base: number[] = [];
  const during: number[] = [];
  for (let k = 0; k < RUNS; k++) {
    // from 88 days: a retention of 89 days prunes only part of the oldest day, which PostgreSQL
    // (whole day tables) keeps until all of it is older; each run here prunes a whole day
    const days = String(P99_DAYS - k);
    base.push(await run('charged, no prune', { USAGE_RETENTION_DAYS: '0' }));
    during.push(await run(`charged, while a pass prunes a day (retention ${days} days)`, { USAGE_RETENTION_DAYS: days, USAGE_PRUNE_DELAY_S: '2', ...(process.env.USAGE_PRUNE_PACE ? { USAGE_PRUNE_PACE: process.env.USAGE_PRUNE_PACE } : {}) }));
  }
  const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
  say(`p99 during the prune: ${(((mean(during) - mean(base)) / mean(base)) * 100).toFixed(1)} % vs without (mean of ${RUNS} runs each; target within 10 %)`);
  await stub.stop();
}

for (const dialect of DBS as ('sqlite' | 'postgres')[]) {
  say(`\n## ${dialect}: ${(ROWS / 1e6).toFixed(1)}M records, ${DAYS} days, 200 cities, 100,000 users, 50 models (load average at start: ${load()})`);
  let db: Db;
  let file: string | null = null;
  let dir: string | null = null;
  let env: Record<string, string>;
  let dropPg: (() => Promise<void>) | null = null;
  if (REUSE) {
    if (dialect === 'sqlite') file = REUSE;
    db = dialect === 'sqlite' ? openNodeSqlite(REUSE) : (await import('../src/db/dialects/postgres.ts')).openPostgres(REUSE, { statementTimeoutMs: 0 });
    env = { [dialect === 'sqlite' ? 'DATABASE_PATH' : 'DATABASE_URL']: REUSE, CITYGATE_MASTER_KEY: 'b'.repeat(64) };
  } else if (dialect === 'sqlite') {
    dir = mkdtempSync(join(process.env.USAGE_SCALE_DIR ?? tmpdir(), 'citygate-usage-scale-'));
    file = join(dir, 'citygate.sqlite');
    db = openNodeSqlite(file);
    env = { DATABASE_PATH: file, CITYGATE_MASTER_KEY: 'b'.repeat(64) };
  } else {
    const { default: pg } = await import('pg');
    const server = process.env.USAGE_SCALE_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
    const name = `citygate_usage_scale_${Date.now()}`;
    const admin = async (text: string) => {
      const c = new pg.Client({ connectionString: server });
      await c.connect();
      await c.query(text).finally(() => c.end());
    };
    await admin(`CREATE DATABASE "${name}"`);
    dropPg = () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    const u = new URL(server);
    u.pathname = `/${name}`;
    const { openPostgres } = await import('../src/db/dialects/postgres.ts');
    db = openPostgres(u.toString(), { statementTimeoutMs: 0 }); // the fill's statements run for minutes
    env = { DATABASE_URL: u.toString(), CITYGATE_MASTER_KEY: 'b'.repeat(64) };
  }
  try {
    // in-process: no timer (gracefulStop false); retention runs only when called below
    const mk = () =>
      createGateway({
        db,
        services: stockServices,
        logger: silentLogger,
        processEnv: { GATEWAY_ADMIN_SECRET_KEY: ADMIN, ...env },
        config: { gracefulStop: false },
        masterKey: { material: env.CITYGATE_MASTER_KEY, source: 'the bench' },
      });
    let gw = mk();
    await gw.init();
    if (!REUSE) await fill(db, dialect);
    else ADMIN = (await sql<{ value: string }>`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`.execute(db.kysely)).rows[0].value;
    const size0 = await dbSize(db, file);
    say(`database size ${REUSE ? 'reused' : 'after the fill'}: ${mb(size0)} (load average ${load()})\n`);
    if (FILL_ONLY) continue;
    if (!P99_ONLY) await reports(gw);

    say('');
    await p99UnderPrune(db, env);
    if (P99_ONLY) continue;

    // the prune of one more day at full speed (no pacing), then a retention pass of 30 days (paced)
    gw = mk();
    await gw.init();
    let t = performance.now();
    const how = dialect === 'postgres' ? 'whole day tables dropped' : 'batches of 5000, no pause';
    const one = await prune(gw.context, NOW, { retentionDays: P99_DAYS - RUNS, pace: 0, batch: 5000 });
    say(`\nprune of one day at full speed (${how}): ${one.records.toLocaleString('en-US')} records${one.partitions !== undefined ? ` (${one.partitions} day table)` : ''} in ${((performance.now() - t) / 1000).toFixed(1)} s (load average ${load()})`);
    const before = await dbSize(db, file);
    t = performance.now();
    const pass = await prune(gw.context, NOW, { retentionDays: PASS_DAYS, pace: 0, batch: 5000 });
    const after = await dbSize(db, file);
    say(
      `retention pass to ${PASS_DAYS} days (${pass.records.toLocaleString('en-US')} records${pass.partitions !== undefined ? `, ${pass.partitions} day tables` : ''}, ${how}): ${((performance.now() - t) / 1000).toFixed(1)} s; ` +
        `database ${mb(before)} → ${mb(after)}${dialect === 'postgres' ? ' (the dropped tables\' files are gone)' : ' (auto_vacuum=incremental: the file shrinks)'}`,
    );
    say('\nafter the pass:');
    await reports(gw);
  } finally {
    await db.close();
    if (KEEP) say(`kept: ${file ?? env.DATABASE_URL}`);
    else {
      if (dir) rmSync(dir, { recursive: true, force: true });
      await dropPg?.();
    }
  }
}
say(`\nload average at the end: ${load()}`);
