// PostgreSQL keeps `usage` in daily partitions (migration 088): one table per UTC day,
// `usage_pYYYYMMDD`, holding [day start, next day start) of created_at (epoch ms), and a
// DEFAULT partition, `usage_default`, for any record no day table holds (so an insert never
// fails: a day nobody made a table for yet, a clock far off). A retention pass then removes a
// day with one DETACH + DROP TABLE: no row-by-row delete, no dead tuples, the files go.
//
// Day tables are made ahead: at the migration (the days of the records kept, and today − 1 to
// today + DAYS_AHEAD), and by every retention pass (hourly, and a minute after boot). A day
// table made while the DEFAULT partition holds records of that day takes them over (PostgreSQL
// refuses to attach a range whose rows sit in the DEFAULT partition).
//
// The retention rule holds: before a day goes, the records of it that an open credit lease or
// an open hold still needs (retention.ts) are found through the indexes (the small tables
// drive: leases, open holds) and moved into the DEFAULT partition (its day has no table any
// more), where the retention pass deletes them in batches once nothing needs them.
//
// SQLite and D1 have no partitions: they prune with batched deletes (retention.ts).
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';

export const DAY_MS = 86_400_000;
/** Day tables made ahead of today, so the DEFAULT partition stays (nearly) empty. */
export const DAYS_AHEAD = 7;
// One process changes the partitions at a time (any fixed number; names "usage partitions").
const LOCK_KEY = 7_141_592_654;

/** The day table of the UTC day that holds epoch-ms `t`. */
export function partitionName(t: number): string {
  return `usage_p${new Date(Math.floor(t / DAY_MS) * DAY_MS).toISOString().slice(0, 10).replace(/-/g, '')}`;
}

/** The same name, in SQL, for a day number `d` (epoch ms / DAY_MS). */
export const PARTITION_NAME_SQL = (d: string) => `'usage_p' || to_char(to_timestamp(${d}::bigint * 86400) AT TIME ZONE 'UTC', 'YYYYMMDD')`;

const partitioned = new WeakMap<Db, boolean>();

/** Whether this database keeps usage in day tables (PostgreSQL, after migration 088). */
export async function isPartitioned(db: Db): Promise<boolean> {
  if (db.dialect !== 'postgres') return false;
  const known = partitioned.get(db);
  if (known) return true;
  const r = await sql<{ kind: string }>`SELECT c.relkind AS kind FROM pg_class c WHERE c.oid = to_regclass('usage')`.execute(db.kysely);
  const yes = r.rows[0]?.kind === 'p';
  if (yes) partitioned.set(db, true); // never goes back
  return yes;
}

/**
 * The DO block that makes the day tables of day numbers [from, to] that do not exist yet, each
 * taking over what the DEFAULT partition holds of its day. Made as a plain table and attached:
 * ATTACH locks `usage` far more lightly than CREATE TABLE … PARTITION OF (inserts and reads go on).
 */
export function ensurePartitionsSql(fromDay: number, toDay: number): string {
  return `DO $cg$
DECLARE d integer; n text;
BEGIN
  PERFORM pg_advisory_xact_lock(${LOCK_KEY});
  PERFORM set_config('lock_timeout', '5s', true);
  FOR d IN ${Math.floor(fromDay)}..${Math.floor(toDay)} LOOP
    n := ${PARTITION_NAME_SQL('d')};
    CONTINUE WHEN to_regclass(n) IS NOT NULL;
    EXECUTE format('CREATE TABLE %I (LIKE usage INCLUDING DEFAULTS)', n);
    EXECUTE format('WITH moved AS (DELETE FROM usage_default WHERE created_at >= %s AND created_at < %s RETURNING *) INSERT INTO %I SELECT * FROM moved',
      d::bigint * 86400000, (d::bigint + 1) * 86400000, n);
    EXECUTE format('ALTER TABLE usage ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', n, d::bigint * 86400000, (d::bigint + 1) * 86400000);
  END LOOP;
END $cg$`;
}

/** Makes sure the day tables of [fromMs, toMs] exist. */
export async function ensurePartitions(db: Db, fromMs: number, toMs: number): Promise<void> {
  await sql.raw(ensurePartitionsSql(Math.floor(fromMs / DAY_MS), Math.floor(toMs / DAY_MS))).execute(db.kysely);
}

/** The day tables (not the DEFAULT partition), oldest first, with their bounds. */
export async function dayPartitions(db: Db): Promise<{ name: string; from: number; to: number }[]> {
  const r = await sql<{ name: string; bound: string }>`SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass('usage')`.execute(db.kysely);
  const out: { name: string; from: number; to: number }[] = [];
  for (const { name, bound } of r.rows) {
    const m = /FROM \('?(-?\d+)'?\) TO \('?(-?\d+)'?\)/.exec(bound);
    if (m) out.push({ name, from: Number(m[1]), to: Number(m[2]) });
  }
  return out.sort((a, b) => a.from - b.from);
}

/**
 * Drops one day table: its records that an open lease or hold still needs (found through the
 * (city_id, user_id, …) index, driven by the small leases and open holds) go to the DEFAULT
 * partition first. One transaction; the exclusive lock DETACH takes is held for catalog work
 * and those few rows only, and waits at most 5 s for running queries (else the day is tried
 * again at the next pass). Returns the records dropped, or null when the table was gone.
 */
export async function dropPartition(db: Db, name: string): Promise<{ dropped: number; kept: number } | null> {
  if (!/^usage_p\d{8,9}$/.test(name)) throw new Error(`not a usage day table: ${name}`);
  const block = `DO $cg$
DECLARE keep bigint[]; total bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(${LOCK_KEY});
  IF to_regclass('${name}') IS NULL THEN PERFORM set_config('citygate.pruned', '', true); RETURN; END IF;
  keep := ARRAY(
    SELECT u.seq FROM leases l JOIN ${name} u ON u.city_id = l.city_id AND u.user_id = l.user_id AND u.lease_owner = l.owner
      AND u.created_at >= l.created_at
    UNION
    SELECT u.seq FROM holds h JOIN ${name} u ON u.city_id = h.city_id AND u.user_id = h.user_id AND u.request_id = h.request_id WHERE h.status = 'held');
  SELECT count(*) INTO total FROM ${name};
  PERFORM set_config('lock_timeout', '5s', true);
  ALTER TABLE usage DETACH PARTITION ${name};
  IF cardinality(keep) > 0 THEN
    INSERT INTO usage SELECT * FROM ${name} WHERE seq = ANY(keep);
  END IF;
  DROP TABLE ${name};
  PERFORM set_config('citygate.pruned', (total - cardinality(keep)) || ' ' || cardinality(keep), true);
END $cg$`;
  const [, res] = await db.batch([sql.raw(block).compile(db.kysely), sql`SELECT current_setting('citygate.pruned', true) AS r`.compile(db.kysely)]);
  const r = String(res.rows[0]?.r ?? '');
  if (!r) return null;
  const [dropped, kept] = r.split(' ').map(Number);
  return { dropped, kept };
}
