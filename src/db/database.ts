import { CompiledQuery, sql, type Compilable, type Kysely, type RawBuilder } from 'kysely';
import type { Schema } from './schema.ts';

/** A Kysely query builder or an already compiled query. */
export type Statement = Compilable | CompiledQuery;

export function compile(q: Statement): CompiledQuery {
  return 'compile' in q ? q.compile() : q;
}

/** What one statement of a batch produced. */
export interface BatchResult {
  rows: Record<string, unknown>[];
  changes: number;
}

/**
 * The database as services see it. Shared code never opens an interactive transaction
 * (D1 has none): a write that must be atomic is one statement, or one `batch`.
 */
export interface Db {
  readonly kysely: Kysely<Schema>;
  readonly dialect: 'sqlite' | 'd1' | 'postgres';
  /** Runs the statements atomically, in order: all of them or none. */
  batch(queries: readonly Statement[]): Promise<BatchResult[]>;
  /**
   * Where the database can tell other processes about a change at once (PostgreSQL's
   * LISTEN/NOTIFY), caches use it on top of their time bound; absent elsewhere.
   */
  readonly changes?: ChangeFeed;
  /**
   * SQLite in a file on Node: repeats a DELETE of at most `batch` rows, paced, until one removes
   * fewer, in a worker thread on its own connection (off the event loop); resolves to the rows
   * deleted. Absent elsewhere: PostgreSQL and D1 run a statement off the gateway's loop anyway.
   */
  repeatDelete?(statement: Statement, opts: RepeatDelete): Promise<number>;
  close(): Promise<void>;
}

export interface RepeatDelete {
  batch: number;
  /** The pause after a batch, as a multiple of the time the batch took (at least 5 ms). */
  pace: number;
  /** A statement run after each batch (a PRAGMA). */
  after?: string;
  /** Polled: true stops the work between two batches. */
  stopped?: () => boolean;
}

/** Change notices between processes sharing a database: a topic ('city', 'env') and a key. */
export interface ChangeFeed {
  /** Tells every other process; best effort (a cache's own time bound covers a lost notice). */
  publish(topic: string, key: string): void;
  subscribe(fn: (topic: string, key: string) => void): void;
}

/** Unix epoch milliseconds: the one time format of every table. */
export const now = (): number => Date.now();

/** True when an error is a UNIQUE / PRIMARY KEY violation, on every dialect. */
export function isUniqueViolation(e: unknown): boolean {
  if ((e as { code?: unknown })?.code === '23505') return true; // PostgreSQL's unique_violation
  const msg = String((e as { message?: unknown })?.message ?? e);
  return /UNIQUE constraint failed|SQLITE_CONSTRAINT_(PRIMARYKEY|UNIQUE)|duplicate key value/i.test(msg);
}

/**
 * The most bound parameters one statement may carry: D1 allows 100, SQLite (node:sqlite)
 * 32766, Postgres 65535. Multi-row statements are chunked to stay within it.
 */
export function maxBoundParameters(dialect: Db['dialect']): number {
  return dialect === 'd1' ? 100 : dialect === 'postgres' ? 65_535 : 32_766;
}

/** Rows per multi-row statement: as many as the dialect's parameter limit allows at `paramsPerRow`, at most `max`. */
export function rowsPerStatement(dialect: Db['dialect'], paramsPerRow: number, max: number): number {
  return Math.max(1, Math.min(max, Math.floor(maxBoundParameters(dialect) / paramsPerRow)));
}

/**
 * Statement texts by row count, each built once (through Kysely: quoting, placeholders) and
 * then reused with fresh parameters: compiling a query costs more than running it on SQLite.
 * `build(n)` must bind exactly `paramsPerRow` parameters per row.
 */
export function textsByRowCount(what: string, paramsPerRow: number, build: (n: number) => CompiledQuery): (n: number) => string {
  const texts = new Map<number, string>();
  return (n) => {
    let text = texts.get(n);
    if (text === undefined) {
      const q = build(n);
      if (q.parameters.length !== n * paramsPerRow) throw new Error(`${what}: unexpected parameter count`);
      texts.set(n, (text = q.sql));
    }
    return text;
  };
}

/**
 * Multi-row statements for `total` items, `width` parameters each: full chunks of `per` items,
 * then the rest in descending powers of two, so only a handful of statement texts ever exist
 * (`text(n)`, from textsByRowCount, builds each once). `bind(i, params, at)` writes item i's
 * parameters from params[at] on, in the statement's column order.
 */
export function chunkedStatements(
  total: number,
  per: number,
  width: number,
  text: (n: number) => string,
  bind: (i: number, params: unknown[], at: number) => void,
): CompiledQuery[] {
  const out: CompiledQuery[] = [];
  const emit = (first: number, n: number) => {
    const params: unknown[] = new Array(n * width);
    for (let i = 0; i < n; i++) bind(first + i, params, i * width);
    out.push(CompiledQuery.raw(text(n), params));
  };
  let at = 0;
  for (; total - at >= per; at += per) emit(at, per);
  for (let n = 1 << 30; n >= 1; n >>= 1) if (total - at >= n) (emit(at, n), (at += n));
  return out;
}

/** The smaller of two values: SQLite's scalar MIN(a, b) is LEAST(a, b) on PostgreSQL. */
export function least(db: Db, a: unknown, b: unknown): RawBuilder<number> {
  return db.dialect === 'postgres' ? sql<number>`LEAST(${a}, ${b})` : sql<number>`MIN(${a}, ${b})`;
}

/** The larger of two values: SQLite's scalar MAX(a, b) is GREATEST(a, b) on PostgreSQL. */
export function greatest(db: Db, a: unknown, b: unknown): RawBuilder<number> {
  return db.dialect === 'postgres' ? sql<number>`GREATEST(${a}, ${b})` : sql<number>`MAX(${a}, ${b})`;
}

/**
 * The row lock a guarded read takes on PostgreSQL (`FOR UPDATE OF alias`), empty on SQLite and
 * D1, where a batch runs alone anyway. On PostgreSQL a batch runs under READ COMMITTED: a
 * concurrent batch on the same row waits for this lock, then re-reads the committed row and
 * re-checks its guard, so guards written for one-batch-at-a-time hold there too.
 */
export function lockRowsOf(db: Db, alias: string): RawBuilder<unknown> {
  return db.dialect === 'postgres' ? sql`FOR UPDATE OF ${sql.raw(alias)}` : sql``;
}
