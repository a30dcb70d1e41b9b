// The rollups: per hour, city, model, mode, status and upstream (usage_hourly), and per UTC
// day, city and model (usage_daily), the calls, tokens, credits and a histogram of citygate's
// overhead. Both are written by the same batch (one transaction) as the records they sum, so
// they are exact for as long as the records exist, and they outlive them
// (USAGE_ROLLUP_RETENTION_DAYS). usage/summary, usage/stats and the console's overview read
// them (whole days from the daily one: at 200 cities × 50 models a month is ~300,000 daily
// rows against millions of hourly ones); usage/list reads the records.
//
// No user in the key: with 100,000 users nearly every call is its own (hour, user) group, so
// a per-user rollup would be about as large as the records; per-user reports read the records
// through their (city_id, user_id, created_at) index.
import { sql, type CompiledQuery, type Kysely, type RawBuilder } from 'kysely';
import { chunkedStatements, rowsPerStatement, textsByRowCount, type Db } from '../../db/database.ts';

export const HOUR_MS = 3_600_000;

/**
 * Overhead histogram: bucket i holds values ≤ OVERHEAD_EDGES[i] (and above the edge before);
 * the last bucket holds the rest. Edges grow by 2^(1/3) (≈26 %) from 0.02 ms to ~160 ms, so a
 * percentile read from it is within one bucket of the exact one.
 */
export const OVERHEAD_EDGES: readonly number[] = Array.from({ length: 39 }, (_, i) => Math.round(0.02 * 2 ** (i / 3) * 1000) / 1000);
export const BUCKETS = OVERHEAD_EDGES.length + 1;
export const BUCKET_COLUMNS = Array.from({ length: BUCKETS }, (_, i) => `h${String(i).padStart(2, '0')}`);

export function bucketOf(v: number): number {
  let lo = 0;
  let hi = OVERHEAD_EDGES.length; // answer in [0, edges.length]
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (v <= OVERHEAD_EDGES[mid]) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Nearest-rank percentile read from a histogram: the upper edge of its bucket (at most the largest value seen). */
export function histogramPercentile(counts: readonly number[], max: number, p: number): number | null {
  const n = counts.reduce((a, b) => a + b, 0);
  if (n === 0) return null;
  const rank = Math.min(n, Math.max(1, Math.ceil((p / 100) * n)));
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i];
    if (seen >= rank) return i < OVERHEAD_EDGES.length ? Math.min(OVERHEAD_EDGES[i], max) : max;
  }
  return max;
}

export const SUMS = ['calls', 'errors', 'input_tokens', 'output_tokens', 'cached_tokens', 'cache_write_tokens', 'credits', 'base_credits', 'duration_ms', 'overhead_n'] as const;

const DAY_MS = 86_400_000;
/** UTC day of an epoch-ms time, `YYYY-MM-DD` (the last one asked for is kept: a batch is nearly all one day). */
let lastDay = { from: 0, to: 0, text: '' };
function dayText(t: number): string {
  if (t >= lastDay.from && t < lastDay.to) return lastDay.text;
  const text = new Date(t).toISOString().slice(0, 10);
  const from = Math.floor(t / DAY_MS) * DAY_MS;
  lastDay = { from, to: from + DAY_MS, text };
  return text;
}

interface Spec {
  table: 'usage_hourly' | 'usage_daily' | 'usage_daily_city' | 'usage_daily_model';
  keys: readonly string[];
  keyOf(r: RollupInput): (string | number)[];
}
export const HOURLY: Spec = {
  table: 'usage_hourly',
  keys: ['hour', 'city_id', 'model', 'mode', 'status', 'upstream'],
  keyOf: (r) => [Math.floor(r.created_at / HOUR_MS) * HOUR_MS, r.city_id ?? '', r.model, r.mode, r.status, r.upstream ?? ''],
};
// The daily rollups' keys are taken from an hourly group's keys [hour, city, model, …]: a batch's
// records are grouped once (by hour), and the daily groups summed from those few groups.
export const DAILY: Spec = {
  table: 'usage_daily',
  keys: ['day', 'city_id', 'model'],
  keyOf: (h) => [dayText(h.created_at), h.city_id ?? '', h.model],
};
// Per day and city, and per day and model: what the console's overview asks most (by city, by
// model, by day) is read from a few hundred rows a day instead of every city × model pair.
export const DAILY_CITY: Spec = { table: 'usage_daily_city', keys: ['day', 'city_id'], keyOf: (h) => [dayText(h.created_at), h.city_id ?? ''] };
export const DAILY_MODEL: Spec = { table: 'usage_daily_model', keys: ['day', 'model'], keyOf: (h) => [dayText(h.created_at), h.model] };
export const DAILY_TABLES = [DAILY, DAILY_CITY, DAILY_MODEL];

/** What a record adds to its group (the fields of a usage row the rollup reads). */
export interface RollupInput {
  created_at: number;
  city_id: string | null;
  model: string;
  mode: string;
  status: string;
  upstream: string | null;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  credits: number;
  base_credits: number | null;
  duration_ms: number;
  overhead_ms: number | null;
}

interface Group {
  keys: (string | number)[];
  sums: number[]; // in SUMS order
  max: number;
  hist: number[];
}

function groupsOf(spec: Spec, rows: readonly RollupInput[]): Group[] {
  const groups = new Map<string, Group>();
  for (const r of rows) {
    const keys = spec.keyOf(r);
    const id = keys.join('\u0000');
    let g = groups.get(id);
    if (!g) groups.set(id, (g = { keys, sums: new Array(SUMS.length).fill(0), max: 0, hist: new Array(BUCKETS).fill(0) }));
    const s = g.sums;
    s[0]++;
    if (r.status !== 'ok') s[1]++;
    s[2] += r.input_tokens;
    s[3] += r.output_tokens;
    s[4] += r.cached_tokens;
    s[5] += r.cache_write_tokens;
    s[6] += r.credits;
    s[7] += r.base_credits ?? r.credits;
    s[8] += r.duration_ms;
    if (r.overhead_ms !== null) {
      s[9]++;
      g.hist[bucketOf(r.overhead_ms)]++;
      if (r.overhead_ms > g.max) g.max = r.overhead_ms;
    }
  }
  return [...groups.values()];
}

/** Hourly groups summed into a coarser rollup's groups. */
function rollUp(spec: Spec, hourly: readonly Group[]): Group[] {
  const groups = new Map<string, Group>();
  for (const h of hourly) {
    const keys = spec.keyOf({ created_at: h.keys[0] as number, city_id: h.keys[1] as string, model: h.keys[2] as string } as RollupInput);
    const id = keys.join('\u0000');
    let g = groups.get(id);
    if (!g) groups.set(id, (g = { keys, sums: new Array(SUMS.length).fill(0), max: 0, hist: new Array(BUCKETS).fill(0) }));
    for (let i = 0; i < SUMS.length; i++) g.sums[i] += h.sums[i];
    for (let i = 0; i < BUCKETS; i++) g.hist[i] += h.hist[i];
    if (h.max > g.max) g.max = h.max;
  }
  return [...groups.values()];
}

const VALUE_COLUMNS = [...SUMS, 'overhead_max', ...BUCKET_COLUMNS];

function maxOf(db: Db, a: string, b: string): RawBuilder<unknown> {
  return db.dialect === 'postgres' ? sql.raw(`GREATEST(${a}, ${b})`) : sql.raw(`MAX(${a}, ${b})`);
}

/** The upserts that add a batch of records to both rollups. */
export function rollupStatements(db: Db, rows: readonly RollupInput[]): CompiledQuery[] {
  const hourly = groupsOf(HOURLY, rows);
  return [...upserts(db, HOURLY, hourly), ...DAILY_TABLES.flatMap((spec) => upserts(db, spec, rollUp(spec, hourly)))];
}

/**
 * The upserts that add a batch of records to the rollup: multi-row INSERT … ON CONFLICT DO
 * UPDATE (each group once per statement, as PostgreSQL requires), within the dialect's
 * bound-parameter limit. Their texts are built once per group count (chunkedStatements keeps
 * those few): compiling the four upserts through Kysely cost ~0.4 ms a batch, about three times what
 * running them takes on SQLite.
 */
function upserts(db: Db, spec: Spec, groups: readonly Group[]): CompiledQuery[] {
  const width = spec.keys.length + VALUE_COLUMNS.length;
  return chunkedStatements(groups.length, rowsPerStatement(db.dialect, width, 200), width, (n) => upsertText(db, spec, n), (i, params, at) => {
    // the columns' order: keys, SUMS, overhead_max, the histogram
    const g = groups[i];
    for (const k of g.keys) params[at++] = k;
    for (const v of g.sums) params[at++] = v;
    params[at++] = g.max;
    for (const v of g.hist) params[at++] = v;
  });
}

/** Upsert texts by group count, per Kysely instance (the dialect decides the SQL) and rollup table. */
const upsertTexts = new WeakMap<Kysely<any>, Map<Spec['table'], (n: number) => string>>();

function upsertText(db: Db, spec: Spec, n: number): string {
  let byTable = upsertTexts.get(db.kysely);
  if (!byTable) upsertTexts.set(db.kysely, (byTable = new Map()));
  let texts = byTable.get(spec.table);
  if (!texts) {
    const t = spec.table;
    const columns = [...spec.keys, ...VALUE_COLUMNS];
    const set = sql.join(
      [
        ...[...SUMS, ...BUCKET_COLUMNS].map((c) => sql.raw(`${c} = ${t}.${c} + excluded.${c}`)),
        sql`overhead_max = ${maxOf(db, `${t}.overhead_max`, 'excluded.overhead_max')}`,
      ],
      sql`, `,
    );
    const row = sql`(${sql.join(columns.map(() => null))})`;
    texts = textsByRowCount(`${t} upsert`, columns.length, (n) =>
      sql`INSERT INTO ${sql.raw(t)} (${sql.raw(columns.join(', '))}) VALUES ${sql.join(Array.from({ length: n }, () => row))}
        ON CONFLICT (${sql.raw(spec.keys.join(', '))}) DO UPDATE SET ${set}`.compile(db.kysely),
    );
    byTable.set(t, texts);
  }
  return texts(n);
}

type MigrationText = string | { sqlite: string; postgres: string };

/** The tables (portable SQL), their indexes, and their backfill from the records already kept. */
export function rollupMigration(): MigrationText[] {
  // the overhead bucket of a record, computed once (the first edge it is under), then counted per column
  const bucket = `CASE WHEN overhead_ms IS NULL THEN -1 ${OVERHEAD_EDGES.map((e, i) => `WHEN overhead_ms <= ${e} THEN ${i}`).join(' ')} ELSE ${OVERHEAD_EDGES.length} END`;
  const fromRecords = `COUNT(*), SUM(CASE WHEN status <> 'ok' THEN 1 ELSE 0 END), SUM(input_tokens), SUM(output_tokens), SUM(cached_tokens),
       SUM(cache_write_tokens), SUM(credits), SUM(COALESCE(base_credits, credits)), SUM(duration_ms), COUNT(overhead_ms),
       COALESCE(MAX(overhead_ms), 0), ${BUCKET_COLUMNS.map((_, i) => `SUM(CASE WHEN b = ${i} THEN 1 ELSE 0 END)`).join(', ')}`;
  const fromRollup = `${SUMS.map((c) => `SUM(${c})`).join(', ')}, MAX(overhead_max), ${BUCKET_COLUMNS.map((c) => `SUM(${c})`).join(', ')}`;
  const valueColumns = `${SUMS.map((c) => `${c} INTEGER NOT NULL DEFAULT 0`).join(',\n       ')},
       overhead_max REAL NOT NULL DEFAULT 0,
       ${BUCKET_COLUMNS.map((c) => `${c} INTEGER NOT NULL DEFAULT 0`).join(', ')}`;
  const hourExpr = `(created_at / ${HOUR_MS}) * ${HOUR_MS}`;
  const dayOfHour = {
    sqlite: `strftime('%Y-%m-%d', hour / 1000, 'unixepoch')`,
    postgres: `to_char(to_timestamp(hour / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  };
  const cols = (spec: Spec) => [...spec.keys, ...VALUE_COLUMNS].join(', ');
  const table = (spec: Spec, keyDdl: string) => [
    `CREATE TABLE IF NOT EXISTS ${spec.table} (
       ${keyDdl},
       ${valueColumns},
       PRIMARY KEY (${spec.keys.join(', ')})
     )`,
  ];
  // the daily rollups are sums of the hourly one (far fewer rows than the records)
  const daily = (d: string) =>
    `INSERT INTO usage_daily (${cols(DAILY)}) SELECT ${d}, city_id, model, ${fromRollup} FROM usage_hourly GROUP BY ${d}, city_id, model`;
  return [
    ...table(HOURLY, 'hour INTEGER NOT NULL, city_id TEXT NOT NULL, model TEXT NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL, upstream TEXT NOT NULL'),
    `CREATE INDEX IF NOT EXISTS usage_hourly_city ON usage_hourly (city_id, hour)`,
    `CREATE INDEX IF NOT EXISTS usage_hourly_model ON usage_hourly (model, hour)`,
    `INSERT INTO usage_hourly (${cols(HOURLY)})
     SELECT ${hourExpr}, COALESCE(city_id, ''), model, mode, status, COALESCE(upstream, ''), ${fromRecords}
     FROM (SELECT *, ${bucket} AS b FROM usage) r
     GROUP BY ${hourExpr}, COALESCE(city_id, ''), model, mode, status, COALESCE(upstream, '')`,
    // the daily rollup of before (day, city, model: no overhead) is rebuilt with the histogram
    `DROP TABLE IF EXISTS usage_daily`,
    ...table(DAILY, 'day TEXT NOT NULL, city_id TEXT NOT NULL, model TEXT NOT NULL'),
    `CREATE INDEX IF NOT EXISTS usage_daily_by_city ON usage_daily (city_id, day)`,
    `CREATE INDEX IF NOT EXISTS usage_daily_by_model ON usage_daily (model, day)`,
    { sqlite: daily(dayOfHour.sqlite), postgres: daily(dayOfHour.postgres) },
    ...table(DAILY_CITY, 'day TEXT NOT NULL, city_id TEXT NOT NULL'),
    `CREATE INDEX IF NOT EXISTS usage_daily_city_by_city ON usage_daily_city (city_id, day)`,
    `INSERT INTO usage_daily_city (${cols(DAILY_CITY)}) SELECT day, city_id, ${fromRollup} FROM usage_daily GROUP BY day, city_id`,
    ...table(DAILY_MODEL, 'day TEXT NOT NULL, model TEXT NOT NULL'),
    `CREATE INDEX IF NOT EXISTS usage_daily_model_by_model ON usage_daily_model (model, day)`,
    `INSERT INTO usage_daily_model (${cols(DAILY_MODEL)}) SELECT day, model, ${fromRollup} FROM usage_daily GROUP BY day, model`,
  ];
}
