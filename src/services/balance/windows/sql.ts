// The statements of the windows engine. A take is one batch: lock the scope row (PostgreSQL),
// add the slice to this minute's bucket only if every window still has room for it, add it to
// the scope's total, then read every window back. A return is one batch: give back what a
// slice did not spend. Both only ever run off the request's path of a call served from a slice.
import { sql, type CompiledQuery, type RawBuilder } from 'kysely';
import type { Db } from '../../../db/database.ts';
import { BUCKET_MS, type WindowSpec } from '../../../kernel/windows.ts';

export const minuteOf = (ms: number) => Math.floor(ms / BUCKET_MS);

/** Buckets a rolling window spans: one more than its length, so a credit counts for at least `seconds`. */
export const bucketsOf = (seconds: number) => Math.ceil((seconds * 1000) / BUCKET_MS) + 1;

const int = (n: number) => sql`CAST(${n} AS BIGINT)`;

/** What a window has counted at `minute` (slices of live processes included). */
function usedIn(scope: string, w: WindowSpec, minute: number): RawBuilder<number> {
  if (w.seconds) return sql<number>`(SELECT COALESCE(SUM(used), 0) FROM window_buckets WHERE scope = ${scope} AND minute > ${int(minute - bucketsOf(w.seconds))})`;
  if (w.since !== undefined) return sql<number>`(SELECT COALESCE(SUM(used), 0) FROM window_buckets WHERE scope = ${scope} AND minute >= ${int(minuteOf(w.since))})`;
  return sql<number>`(SELECT COALESCE(MAX(total), 0) FROM window_scopes WHERE scope = ${scope})`;
}

/** The oldest minute with credits in a rolling window (when its credits leave, the window frees). */
function oldestIn(scope: string, w: WindowSpec, minute: number): RawBuilder<number | null> {
  if (!w.seconds) return sql`NULL`;
  return sql`(SELECT MIN(minute) FROM window_buckets WHERE scope = ${scope} AND used > 0 AND minute > ${int(minute - bucketsOf(w.seconds))})`;
}

export interface TakeRead {
  took: number;
  open: number;
  used: number[];
  oldest: (number | null)[];
}

/** One take of `amount` at `minute`: the batch, and how to read its answer. */
export function takeStatements(db: Db, scope: string, windows: readonly WindowSpec[], minute: number, amount: number, takeId: string, at: number): { statements: CompiledQuery[]; read: (rows: Record<string, unknown>[]) => TakeRead } {
  const guards = windows.map((w) => sql`${usedIn(scope, w, minute)} + ${int(amount)} <= ${int(w.limit)}`);
  const statements = [
    sql`INSERT INTO window_scopes (scope, total, updated_at) VALUES (${scope}, 0, ${at}) ON CONFLICT (scope) DO NOTHING`.compile(db.kysely),
  ];
  if (db.dialect === 'postgres') statements.push(sql`SELECT 1 FROM window_scopes WHERE scope = ${scope} FOR UPDATE`.compile(db.kysely));
  statements.push(
    sql`INSERT INTO window_buckets (scope, minute, used, open_slices, take_id)
      SELECT ${scope}, ${int(minute)}, ${int(amount)}, ${int(amount)}, ${takeId} WHERE ${guards.length ? sql.join(guards, sql` AND `) : sql`1 = 1`}
      ON CONFLICT (scope, minute) DO UPDATE SET used = window_buckets.used + excluded.used,
        open_slices = window_buckets.open_slices + excluded.open_slices, take_id = excluded.take_id`.compile(db.kysely),
    sql`UPDATE window_scopes SET total = total + ${int(amount)}, updated_at = ${at}
      WHERE scope = ${scope} AND EXISTS (SELECT 1 FROM window_buckets WHERE scope = ${scope} AND minute = ${int(minute)} AND take_id = ${takeId})`.compile(db.kysely),
    readStatement(db, scope, windows, minute, takeId),
  );
  return { statements, read: (rows) => parseRead(rows[0], windows.length) };
}

export function readStatement(db: Db, scope: string, windows: readonly WindowSpec[], minute: number, takeId = ''): CompiledQuery {
  const cols = windows.flatMap((w, i) => [sql`${usedIn(scope, w, minute)} AS ${sql.ref(`u${i}`)}`, sql`${oldestIn(scope, w, minute)} AS ${sql.ref(`o${i}`)}`]);
  return sql`SELECT
      (SELECT COUNT(*) FROM window_buckets WHERE scope = ${scope} AND minute = ${int(minute)} AND take_id = ${takeId}) AS took,
      (SELECT COALESCE(MAX(open_slices), 0) FROM window_buckets WHERE scope = ${scope} AND minute = ${int(minute)}) AS open
      ${cols.length ? sql`, ${sql.join(cols)}` : sql``}`.compile(db.kysely);
}

export function parseRead(r: Record<string, unknown> | undefined, n: number): TakeRead {
  const used: number[] = [];
  const oldest: (number | null)[] = [];
  for (let i = 0; i < n; i++) {
    used.push(Number(r?.[`u${i}`] ?? 0));
    const o = r?.[`o${i}`];
    oldest.push(o === null || o === undefined ? null : Number(o));
  }
  return { took: Number(r?.took ?? 0), open: Number(r?.open ?? 0), used, oldest };
}

/** Gives back `unspent` of a slice of `taken` credits at `minute` (its open share goes too). */
export function returnStatements(db: Db, scope: string, minute: number, taken: number, unspent: number, at: number): CompiledQuery[] {
  // The scope row first, as a take locks it (PostgreSQL): a take and a return never deadlock.
  const out = db.dialect === 'postgres' ? [sql`SELECT 1 FROM window_scopes WHERE scope = ${scope} FOR UPDATE`.compile(db.kysely)] : [];
  out.push(
    sql`UPDATE window_buckets SET used = used - ${int(unspent)}, open_slices = open_slices - ${int(taken)} WHERE scope = ${scope} AND minute = ${int(minute)}`.compile(db.kysely),
  );
  if (unspent > 0) out.push(sql`UPDATE window_scopes SET total = total - ${int(unspent)}, updated_at = ${at} WHERE scope = ${scope}`.compile(db.kysely));
  return out;
}
