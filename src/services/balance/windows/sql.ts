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
export function takeStatements(db: Db, scope: string, windows: readonly WindowSpec[], minute: number, amount: number, takeId: string, at: number, owner: string, now: number): { statements: CompiledQuery[]; read: (rows: Record<string, unknown>[]) => TakeRead } {
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
    // This process's slice, so that another can sweep it if this one dies (renewed_at: real time).
    sql`INSERT INTO window_slices (owner, scope, minute, taken, take_id, renewed_at, created_at)
      SELECT ${owner}, ${scope}, ${int(minute)}, ${int(amount)}, ${takeId}, ${int(now)}, ${int(now)}
      WHERE EXISTS (SELECT 1 FROM window_buckets WHERE scope = ${scope} AND minute = ${int(minute)} AND take_id = ${takeId})
      ON CONFLICT (owner, scope, minute) DO UPDATE SET taken = window_slices.taken + excluded.taken, take_id = excluded.take_id, renewed_at = excluded.renewed_at`.compile(db.kysely),
    readStatement(db, scope, windows, minute, takeId),
  );
  return { statements, read: (rows) => parseRead(rows[0], windows.length) };
}

/**
 * The oldest minute any of these windows still reads (null: none reads buckets, or one reads
 * them all): older buckets can go. A window without end reads the scope's total, not buckets.
 */
export function keepFrom(windows: readonly WindowSpec[], minute: number): number | null {
  let from = minute;
  for (const w of windows) {
    if (w.seconds) from = Math.min(from, minute - bucketsOf(w.seconds) + 1);
    else if (w.since !== undefined) from = Math.min(from, minuteOf(w.since));
  }
  return from < minute ? from : null;
}

/** Removes a scope's buckets no window reads any more (run now and then with a take). */
export function pruneStatement(db: Db, scope: string, before: number): CompiledQuery {
  return sql`DELETE FROM window_buckets WHERE scope = ${scope} AND minute < ${int(before)} AND open_slices = 0`.compile(db.kysely);
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
export function returnStatements(db: Db, scope: string, minute: number, taken: number, unspent: number, at: number, owner: string): CompiledQuery[] {
  // The scope row first, as a take locks it (PostgreSQL): a take and a return never deadlock.
  const out = db.dialect === 'postgres' ? [sql`SELECT 1 FROM window_scopes WHERE scope = ${scope} FOR UPDATE`.compile(db.kysely)] : [];
  out.push(
    sql`UPDATE window_buckets SET used = used - ${int(unspent)}, open_slices = open_slices - ${int(taken)} WHERE scope = ${scope} AND minute = ${int(minute)}`.compile(db.kysely),
  );
  if (unspent > 0) out.push(sql`UPDATE window_scopes SET total = total - ${int(unspent)}, updated_at = ${at} WHERE scope = ${scope}`.compile(db.kysely));
  out.push(sql`DELETE FROM window_slices WHERE owner = ${owner} AND scope = ${scope} AND minute = ${int(minute)}`.compile(db.kysely));
  return out;
}

/** Gives back `back` free credits of a slice that stays open for its calls in flight (its row and open share shrink by as much). */
export function giveBackStatements(db: Db, scope: string, minute: number, back: number, at: number, owner: string): CompiledQuery[] {
  const out = db.dialect === 'postgres' ? [sql`SELECT 1 FROM window_scopes WHERE scope = ${scope} FOR UPDATE`.compile(db.kysely)] : [];
  out.push(
    sql`UPDATE window_buckets SET used = used - ${int(back)}, open_slices = open_slices - ${int(back)} WHERE scope = ${scope} AND minute = ${int(minute)}`.compile(db.kysely),
    sql`UPDATE window_scopes SET total = total - ${int(back)}, updated_at = ${at} WHERE scope = ${scope}`.compile(db.kysely),
    sql`UPDATE window_slices SET taken = taken - ${int(back)} WHERE owner = ${owner} AND scope = ${scope} AND minute = ${int(minute)}`.compile(db.kysely),
  );
  return out;
}

/**
 * What calls of a scope spent since `since` (epoch ms, the windows' clock), from the usage
 * records of every process: a scope's calls are its subscription's user's ('sub:<id>') or its
 * key's ('key:<id>'). Null for a scope it cannot read (nothing is then given back).
 */
export function usageSince(scope: string, since: number): RawBuilder<number> | null {
  const [kind, id] = [scope.slice(0, scope.indexOf(':')), scope.slice(scope.indexOf(':') + 1)];
  if (kind === 'sub') {
    return sql<number>`(SELECT COALESCE(SUM(u.credits), 0) FROM usage u JOIN subscriptions s ON s.subscription_id = ${id}
      AND u.city_id = s.city_id AND u.user_id = s.user_id WHERE u.created_at >= ${int(since)})`;
  }
  if (kind === 'key') return sql<number>`(SELECT COALESCE(SUM(u.credits), 0) FROM usage u WHERE u.key_id = ${id} AND u.created_at >= ${int(since)})`;
  return null;
}

/**
 * Sweeps one dead process's slice: gives back what the scope's usage records do not account
 * for since it was taken (capped at the slice), and forgets the row. `sweepId` marks the row so
 * the statements after the first apply only when it was this sweep that took it.
 */
export function sweepStatements(db: Db, s: { owner: string; scope: string; minute: number; created_at: number }, cutoff: number, sweepId: string, at: number): CompiledQuery[] | null {
  const spent = usageSince(s.scope, s.created_at);
  if (!spent) return null;
  const mine = sql`owner = ${s.owner} AND scope = ${s.scope} AND minute = ${int(s.minute)} AND take_id = ${sweepId}`;
  const back = sql`(SELECT ${greatestOf(db, sql`0`, sql`taken - ${spent}`)} FROM window_slices WHERE ${mine})`;
  const out = db.dialect === 'postgres' ? [sql`SELECT 1 FROM window_scopes WHERE scope = ${s.scope} FOR UPDATE`.compile(db.kysely)] : [];
  out.push(
    sql`UPDATE window_slices SET take_id = ${sweepId} WHERE owner = ${s.owner} AND scope = ${s.scope} AND minute = ${int(s.minute)} AND renewed_at < ${int(cutoff)}`.compile(db.kysely),
    sql`UPDATE window_scopes SET total = total - COALESCE(${back}, 0), updated_at = ${int(at)} WHERE scope = ${s.scope} AND EXISTS (SELECT 1 FROM window_slices WHERE ${mine})`.compile(db.kysely),
    sql`UPDATE window_buckets SET used = used - COALESCE(${back}, 0), open_slices = open_slices - COALESCE((SELECT taken FROM window_slices WHERE ${mine}), 0)
      WHERE scope = ${s.scope} AND minute = ${int(s.minute)} AND EXISTS (SELECT 1 FROM window_slices WHERE ${mine})`.compile(db.kysely),
    sql`DELETE FROM window_slices WHERE ${mine}`.compile(db.kysely),
  );
  return out;
}

function greatestOf(db: Db, a: unknown, b: unknown): RawBuilder<number> {
  return db.dialect === 'postgres' ? sql<number>`GREATEST(${a}, ${b})` : sql<number>`MAX(${a}, ${b})`;
}
