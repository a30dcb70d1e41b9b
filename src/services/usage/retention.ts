// Retention: usage records older than USAGE_RETENTION_DAYS (default 90; 0 keeps them forever)
// and hourly rollup rows older than USAGE_ROLLUP_RETENTION_DAYS (default 0: forever), and
// request logs with their blobs older than REQUEST_LOG_RETENTION_DAYS (default 7), are
// deleted in small batches, off the request path: on a timer in a long-lived process (Node),
// from the Worker's scheduled handler (a cron trigger) on the edge.
//
// What is never deleted: the ledger (money history is kept forever: it is not touched here),
// and a record something still needs:
//   - a record billed under a credit lease that is still open (usage.lease_owner, city and user
//     name a row of leases, and the record is not older than that lease): the lease sweeper
//     charges a dead process's calls from its records;
//   - a record whose call's credit hold is still open (holds.status = 'held', same request
//     id): the hold sweeper settles it at the record's cost.
// They go in a later pass, once the lease or hold is closed.
//
// Batches are small and paced (a pause USAGE_PRUNE_PACE, default nine, times as long as the batch took), so a prune
// never holds the database for long: the calls served meanwhile keep their latency. On SQLite
// in a file the record batches run in a worker thread on a connection of its own (db.
// repeatDelete, dialects/node-sqlite.ts): node:sqlite is synchronous, and on the gateway's event
// loop each batch made the calls queued behind it wait (+26 % on a charged call's p99).
//
// SQLite: a database file created by this version has auto_vacuum=INCREMENTAL (dialects/
// node-sqlite.ts), and each batch returns the pages it freed to the file system (PRAGMA
// incremental_vacuum), so the file shrinks. An older file keeps auto_vacuum=NONE until an
// operator runs VACUUM once (docs/usage.md): its freed pages are reused by new records, so it
// stops growing, but it does not shrink.
import { sql, type RawBuilder } from 'kysely';
import type { Db, RepeatDelete } from '../../db/database.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { pruneRequestLogs } from './request-log/prune.ts';
import { DAYS_AHEAD, dayPartitions, dropPartition, ensurePartitions, isPartitioned } from './partitions.ts';

const DAY_MS = 86_400_000;
export const DEFAULT_RETENTION_DAYS = 90;
/**
 * Records per DELETE. SQLite: 50 records (~3–5 ms with the indexes) hold the write lock briefly,
 * so the gateway's own writes (its usage and lease flushes) rarely wait for a batch, and wait
 * little when they do. PostgreSQL and D1 lock rows, not the database.
 */
const DEFAULT_BATCH = { sqlite: 50, postgres: 1000, d1: 1000 } as const;

export interface PruneResult {
  records: number;
  rollupRows: number;
  /** Request logs deleted (rows, with their blobs). */
  requestLogs: number;
  /** PostgreSQL: day tables dropped (absent elsewhere). */
  partitions?: number;
  /** How long the pass took, pauses included. */
  ms: number;
}

/** A whole number ≥ 0 from the env, or the default. */
function days(gw: GatewayContext, key: string, dflt: number): number {
  const raw = gw.env.get(key);
  if (raw === undefined || raw === '') return dflt;
  const n = Number(raw);
  return Number.isFinite(n) && n >= 0 ? Math.floor(n) : dflt;
}

export const retentionDays = (gw: GatewayContext) => days(gw, 'USAGE_RETENTION_DAYS', DEFAULT_RETENTION_DAYS);
export const rollupRetentionDays = (gw: GatewayContext) => days(gw, 'USAGE_ROLLUP_RETENTION_DAYS', 0);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One retention pass. `batch`: records per DELETE; `pace`: the pause after a batch, as a
 * multiple of the time the batch took (default USAGE_PRUNE_PACE or 9, at least 5 ms), so a prune uses a bounded
 * share of the database and of the event loop.
 */
export async function prune(gw: GatewayContext, now = Date.now(), opts: { batch?: number; pace?: number; stopped?: () => boolean; retentionDays?: number } = {}): Promise<PruneResult> {
  const started = Date.now();
  const db = gw.db;
  const batch = opts.batch ?? (days(gw, 'USAGE_PRUNE_BATCH', DEFAULT_BATCH[db.dialect]) || 1);
  const pace = opts.pace ?? days(gw, 'USAGE_PRUNE_PACE', 9);
  const out: PruneResult = { records: 0, rollupRows: 0, requestLogs: 0, ms: 0 };
  // SQLite, after each batch: the pages it freed go back to the file system (a new file's auto_vacuum=INCREMENTAL)
  const after = db.dialect === 'sqlite' ? 'PRAGMA incremental_vacuum(512)' : undefined;

  const keepDays = opts.retentionDays ?? retentionDays(gw);
  // PostgreSQL: day tables (partitions.ts). Made ahead first, so today's records never wait in
  // the DEFAULT partition; then every day wholly older than the setting is dropped, and the
  // DEFAULT partition (records kept for a lease or hold, strays) pruned in batches below.
  const dayTables = await isPartitioned(db);
  if (dayTables) {
    await ensurePartitions(db, now - DAY_MS, now + DAYS_AHEAD * DAY_MS);
    out.partitions = 0;
  }
  if (keepDays > 0) {
    const cutoff = now - keepDays * DAY_MS;
    if (dayTables) {
      for (const p of await dayPartitions(db)) {
        if (p.to > cutoff || opts.stopped?.()) break;
        const t = Date.now();
        let r: Awaited<ReturnType<typeof dropPartition>>;
        try {
          r = await dropPartition(db, p.name);
        } catch (e) {
          // lock_not_available: long queries held usage past lock_timeout; the next pass retries
          if ((e as { code?: string }).code !== '55P03') throw e;
          gw.log('warn', 'usage retention: a day table was busy; the next pass drops it', { table: p.name });
          break;
        }
        if (r) {
          out.records += r.dropped;
          out.partitions = (out.partitions ?? 0) + 1;
        }
        await sleep(Math.max(5, pace * (Date.now() - t)));
      }
    }
    // What may still need a record is small: the open holds' requests, computed once per
    // statement, and for a leased record its lease, one primary-key probe of leases.
    const table = sql.table(dayTables ? 'usage_default' : 'usage');
    const del = sql`DELETE FROM ${table} WHERE seq IN (
        SELECT seq FROM ${table} u
        WHERE created_at < ${cutoff}
          AND (lease_owner IS NULL OR NOT EXISTS (SELECT 1 FROM leases l
            WHERE l.owner = u.lease_owner AND l.city_id = u.city_id AND l.user_id = u.user_id AND u.created_at >= l.created_at))
          AND request_id NOT IN (SELECT request_id FROM holds WHERE status = 'held')
        ORDER BY created_at LIMIT ${batch})`;
    out.records += await repeatDelete(db, del, { batch, pace, after, stopped: opts.stopped });
  }

  const keepRollup = rollupRetentionDays(gw);
  if (keepRollup > 0) {
    const cutoff = Math.floor((now - keepRollup * DAY_MS) / DAY_MS) * DAY_MS; // whole days
    // PostgreSQL: one hour, or one day, per statement (each is one index range)
    const day = new Date(cutoff).toISOString().slice(0, 10);
    for (const [table, column, bound] of [
      ['usage_hourly', 'hour', cutoff],
      ['usage_daily', 'day', day],
      ['usage_daily_city', 'day', day],
      ['usage_daily_model', 'day', day],
    ] as const) {
      if (db.dialect !== 'postgres') {
        // SQLite and D1: `batch` rows at a time (an hour holds thousands), by rowid
        const t = sql.table(table);
        const del = sql`DELETE FROM ${t} WHERE rowid IN (SELECT rowid FROM ${t} WHERE ${sql.ref(column)} < ${bound} LIMIT ${batch})`;
        out.rollupRows += await repeatDelete(db, del, { batch, pace, after, stopped: opts.stopped });
        continue;
      }
      for (;;) {
        const first = await sql<{ k: number | string | null }>`SELECT MIN(${sql.ref(column)}) AS k FROM ${sql.table(table)}`.execute(db.kysely);
        const k = first.rows[0]?.k;
        if (k === null || k === undefined || (typeof bound === 'number' ? Number(k) >= bound : String(k) >= bound) || opts.stopped?.()) break;
        const t = Date.now();
        const key = typeof bound === 'number' ? Number(k) : String(k);
        out.rollupRows += Number((await sql`DELETE FROM ${sql.table(table)} WHERE ${sql.ref(column)} = ${key}`.execute(db.kysely)).numAffectedRows ?? 0);
        await sleep(Math.max(5, pace * (Date.now() - t)));
      }
    }
  }
  // request logs and their blobs (REQUEST_LOG_RETENTION_DAYS, request-log/prune.ts)
  out.requestLogs = await pruneRequestLogs(gw, now, Math.min(batch, 500), async (took) => void (await sleep(Math.max(5, pace * took))), opts.stopped);
  out.ms = Date.now() - started;
  if (out.records > 0 || out.rollupRows > 0 || out.requestLogs > 0) gw.log('info', 'usage retention pass', { ...out });
  return out;
}

/**
 * Repeats a DELETE of at most `batch` rows until one removes fewer, paced: in a worker thread
 * where the database can (SQLite in a file on Node: db.repeatDelete), else from here.
 */
async function repeatDelete(db: Db, del: RawBuilder<unknown>, o: RepeatDelete): Promise<number> {
  if (db.repeatDelete) return db.repeatDelete(del.compile(db.kysely), o);
  let deleted = 0;
  for (;;) {
    if (o.stopped?.()) break;
    const t = Date.now();
    const n = Number((await del.execute(db.kysely)).numAffectedRows ?? 0);
    deleted += n;
    if (o.after) await sql.raw(o.after).execute(db.kysely);
    if (n < o.batch || o.stopped?.()) break;
    await sleep(Math.max(5, o.pace * (Date.now() - t)));
  }
  return deleted;
}

/** Hourly passes in a long-lived process (the first a minute after boot); unref'd, so they never keep it alive. */
export class PruneTimer {
  #timer: ReturnType<typeof setTimeout> | null = null;
  #running: Promise<unknown> | null = null;
  #stopped = false;
  readonly gw: GatewayContext;
  constructor(gw: GatewayContext) {
    this.gw = gw;
  }

  start(delayMs = 60_000, everyMs = 3_600_000): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.run().finally(() => {
        this.#running = null;
        this.start(everyMs, everyMs);
      });
    }, delayMs);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  run(): Promise<unknown> {
    return prune(this.gw, Date.now(), { stopped: () => this.#stopped }).catch((e) => {
      if (!this.gw.databaseDown(e)) this.gw.log('error', 'usage retention pass failed; the next one retries', { error: String(e) });
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#running;
  }
}
