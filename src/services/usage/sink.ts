// The 'metering' capability: AI calls hand their meter records here and go on. Records wait
// in memory and are written in batches off the request path (after USAGE_FLUSH_MS, or at once
// when USAGE_BATCH_SIZE are waiting), each batch together with the hourly rollup it adds to (rollup.ts),
// and all of them on a graceful stop.
//
// A runtime without a graceful stop (a Worker: config.gracefulStop is false) would lose what
// waits for a later batch when its isolate is evicted, so there each record is written right
// after the request that made it, in that request's background (gw.waitUntil); writes are
// serialized, so records of concurrent requests that arrive while one is in flight still go out
// together in the next batch.
//
// What a hard kill (SIGKILL, power loss) can cost: the records of the last flush interval,
// never money: charges live in the ledger, written on the request path by the billing batch.
//
// A batch that is retried after an ambiguous failure (its commit unknown) is retried as exactly
// the same rows; it fails on the UNIQUE usage_id of its first attempt if that attempt committed,
// and is then dropped: records and rollup are applied exactly once, and records that arrived
// meanwhile go in the next batch.
//
// A batch is a few multi-row INSERTs (not one statement per record: building and compiling a
// statement per record cost more CPU than the rest of a chat call's metering). Each statement
// stays within the dialect's bound-parameter limit (D1: 100, i.e. 5 rows), and row counts are
// a full chunk or a power of two, so only a handful of statement texts exist (each built once
// and prepared once).
import type { CompiledQuery, Kysely, Selectable } from 'kysely';
import { chunkedStatements, isUniqueViolation, rowsPerStatement, textsByRowCount, type Db } from '../../db/database.ts';
import type { Schema, UsageTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { randomToken } from '../../kernel/crypto.ts';
import type { MeterRecord, MeteringSink } from '../../kernel/metering.ts';
import { rollupStatements } from './rollup.ts';

type Row = Omit<Selectable<UsageTable>, 'seq'>;

/** The columns of a usage row, in the order of the INSERT's parameters. */
const COLUMNS = [
  'usage_id', 'request_id', 'city_id', 'user_id', 'identity', 'model', 'mode', 'status', 'error_code',
  'input_tokens', 'output_tokens', 'cached_tokens', 'images', 'seconds', 'credits', 'duration_ms', 'overhead_ms', 'created_at', 'estimated',
  'upstream', 'attempts', 'lease_owner', 'cache_write_tokens', 'cache_write_1h_tokens', 'note', 'base_credits', 'alias', 'key_id',
] as const satisfies readonly (keyof Row)[];
/** Largest rows per INSERT on any dialect (bounds the statement text besides the parameter limit). */
const MAX_ROWS_PER_INSERT = 256;

const MAX_BUFFERED = 200_000;

const DAY_MS = 86_400_000;
/** The last day asked for, kept: a batch's rows are nearly all of one day. */
let lastDay = { from: 0, to: 0, text: '' };

/** UTC day of an epoch-ms time, `YYYY-MM-DD`. */
export function dayOf(t: number): string {
  if (t >= lastDay.from && t < lastDay.to) return lastDay.text;
  const text = new Date(t).toISOString().slice(0, 10); // throws on an invalid time, as before
  const from = Math.floor(t / DAY_MS) * DAY_MS;
  lastDay = { from, to: from + DAY_MS, text };
  return text;
}

// Usage ids: a random per-process part (72 bits, drawn on first use: Workers refuse random
// values at load) and a counter, so two records never share an id without drawing entropy per
// record. They are not secret.
let idPrefix: string | null = null;
let idCounter = 0;
function usageIdSuffix(): string {
  idPrefix ??= randomToken(9);
  return `${idPrefix}${(idCounter++).toString(36)}`;
}

/** `use_` and the time part of a usage id, kept for the millisecond (several calls end in each). */
let stamp = { at: -1, text: '' };
function idStamp(created: number): string {
  if (created !== stamp.at) stamp = { at: created, text: `use_${created.toString(36).padStart(9, '0')}` };
  return stamp.text;
}

const int = (n: unknown) => (typeof n === 'number' && Number.isFinite(n) ? Math.max(0, Math.round(n)) : 0);

export function toRow(r: MeterRecord): Row {
  const created = int(r.created_at) || Date.now();
  return {
    // time-ordered, so the UNIQUE index grows at its end instead of at random pages
    usage_id: `${idStamp(created)}${usageIdSuffix()}`,
    request_id: String(r.request_id ?? ''),
    city_id: r.city_id ?? null,
    user_id: r.user_id ?? null,
    identity: r.identity,
    model: String(r.model ?? ''),
    mode: String(r.mode ?? ''),
    status: r.status,
    error_code: r.error_code ?? null,
    input_tokens: int(r.input_tokens),
    output_tokens: int(r.output_tokens),
    cached_tokens: int(r.cached_tokens),
    images: int(r.images),
    seconds: typeof r.seconds === 'number' && Number.isFinite(r.seconds) ? Math.max(0, r.seconds) : 0,
    credits: int(r.credits),
    duration_ms: int(r.duration_ms),
    overhead_ms: typeof r.overhead_ms === 'number' && Number.isFinite(r.overhead_ms) ? Math.max(0, Math.round(r.overhead_ms * 100) / 100) : null,
    created_at: created,
    estimated: r.estimated ? 1 : 0,
    upstream: r.upstream ?? null,
    attempts: r.attempts === undefined ? null : int(r.attempts),
    lease_owner: r.lease_owner ?? null,
    cache_write_tokens: int(r.cache_write_tokens),
    cache_write_1h_tokens: int(r.cache_write_1h_tokens),
    note: r.note ?? null,
    base_credits: r.base_credits === undefined ? int(r.credits) : int(r.base_credits),
    alias: r.alias ?? null,
    key_id: r.key_id ?? null,
  };
}

export class UsageBuffer implements MeteringSink {
  readonly gw: GatewayContext;
  #buf: Row[] = [];
  #timer: ReturnType<typeof setTimeout> | null = null;
  #wake: (() => void) | null = null;
  #chain: Promise<void> = Promise.resolve();
  #stopped = false;
  /**
   * Rows at the head of the buffer whose last write failed: the retry sends exactly them as
   * one batch, so if that attempt did commit, its UNIQUE failure drops only them, never records
   * that arrived since.
   */
  #failedHead = 0;

  constructor(gw: GatewayContext) {
    this.gw = gw;
  }

  get pending(): number {
    return this.#buf.length;
  }

  #num(key: string, dflt: number, min: number, max: number): number {
    const v = Number(this.gw.env.get(key) ?? dflt);
    return Number.isFinite(v) ? Math.min(max, Math.max(min, Math.floor(v))) : dflt;
  }

  record(r: MeterRecord): void {
    try {
      this.#buf.push(toRow(r));
    } catch (e) {
      this.gw.log('error', 'usage record dropped', { error: String(e) });
      return;
    }
    if (this.#buf.length > MAX_BUFFERED) {
      const dropped = this.#buf.length - MAX_BUFFERED;
      this.#buf.splice(0, dropped);
      this.#failedHead = Math.max(0, this.#failedHead - dropped);
      this.gw.log('error', 'usage buffer full: oldest records dropped', { kept: MAX_BUFFERED });
    }
    // Written by this request's own background work: nothing waits on a timer another request set.
    if (this.#writeAfterEachRequest()) this.gw.waitUntil(this.flush());
    else if (this.#buf.length >= this.#num('USAGE_BATCH_SIZE', 500, 1, 5000)) this.#flushSoon(0);
    else if (!this.#timer) this.#flushSoon(this.#num('USAGE_FLUSH_MS', 250, 0, 60_000));
  }

  /** Stopped, or on a runtime that never stops (a Worker): nothing may wait for a later batch. */
  #writeAfterEachRequest(): boolean {
    return this.#stopped || !this.gw.config.gracefulStop;
  }

  /** Schedules a flush, kept alive by the runtime (waitUntil) until it has run. */
  #flushSoon(ms: number): void {
    if (this.#timer) {
      if (ms === 0) {
        clearTimeout(this.#timer);
        this.#wake?.(); // the scheduled flush runs now and drains everything buffered
      }
      return;
    }
    const done = new Promise<void>((resolve) => {
      this.#wake = resolve;
      this.#timer = setTimeout(resolve, ms);
    }).then(() => {
      this.#timer = null;
      this.#wake = null;
      return this.flush();
    });
    this.gw.waitUntil(done);
  }

  /** Writes everything buffered now; serialized, so batches never interleave. */
  flush(): Promise<void> {
    this.#chain = this.#chain.then(() => this.#drain());
    return this.#chain;
  }

  async #drain(): Promise<void> {
    const size = this.#num('USAGE_BATCH_SIZE', 500, 1, 5000);
    while (this.#buf.length > 0) {
      const batch = this.#buf.slice(0, this.#failedHead || size);
      try {
        await this.gw.db.batch(this.#statements(batch));
      } catch (e) {
        if (!isUniqueViolation(e)) {
          this.#failedHead = batch.length;
          if (!this.gw.databaseDown(e)) this.gw.log('error', 'usage flush failed; will retry', { error: String(e), records: batch.length });
          if (!this.#stopped && !this.#timer) this.#flushSoon(1000);
          return;
        }
        // an earlier attempt of this very batch committed: it is in already
      }
      this.#failedHead = 0;
      this.#buf.splice(0, batch.length);
    }
  }

  #statements(rows: Row[]): CompiledQuery[] {
    // the records and the hourly rollup they add to, in one batch (one transaction): exact
    return [...insertStatements(this.gw.db, rows), ...rollupStatements(this.gw.db, rows)];
  }

  /** Graceful stop: write everything; later records are written at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
      this.#wake?.();
    }
    await this.flush();
  }
}

/** Rows per INSERT for a dialect: as many as its bound-parameter limit allows, at most MAX_ROWS_PER_INSERT. */
export function rowsPerInsert(dialect: Db['dialect']): number {
  return rowsPerStatement(dialect, COLUMNS.length, MAX_ROWS_PER_INSERT);
}

/** INSERT texts by row count, per Kysely instance (the dialect decides the placeholder syntax). */
const insertSql = new WeakMap<Kysely<Schema>, (n: number) => string>();

function insertText(db: Db, n: number): string {
  const k = db.kysely;
  let texts = insertSql.get(k);
  if (!texts) {
    // The parameters follow COLUMNS, row by row.
    const template = Object.fromEntries(COLUMNS.map((c) => [c, null])) as unknown as Row;
    // SQLite on Node: OR ROLLBACK. A conflict (a retried batch whose first attempt committed)
    // then ends the whole transaction, as the batch's failure did anyway, so the statement
    // needs no statement journal: a multi-row INSERT in a transaction otherwise copies the pages
    // it changes into one, spilled to a temp file past 64 KiB. Measured per record in one process
    // (500-record batches with their rollup): 12.1 → 7.8 µs of CPU, 4.2 → 1.4 write syscalls.
    // D1 runs a batch in a transaction of its own, which a statement must not end; PostgreSQL
    // has no such clause.
    const insert = () => (db.dialect === 'sqlite' ? k.insertInto('usage').orRollback() : k.insertInto('usage'));
    texts = textsByRowCount('usage insert', COLUMNS.length, (n) => insert().values(Array.from({ length: n }, () => template)).compile());
    insertSql.set(k, texts);
  }
  return texts(n);
}

/**
 * Multi-row INSERTs of the rows, each within the dialect's bound-parameter limit: full chunks,
 * then the rest in descending powers of two (so few distinct statement texts ever exist).
 */
export function insertStatements(db: Db, rows: readonly Row[]): CompiledQuery[] {
  return chunkedStatements(rows.length, rowsPerInsert(db.dialect), COLUMNS.length, (n) => insertText(db, n), (i, params, at) => {
    const r = rows[i];
    for (const c of COLUMNS) params[at++] = r[c];
  });
}
