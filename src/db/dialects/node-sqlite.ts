// The embedded default: Kysely's SQLite dialect driven by Node's built-in `node:sqlite`.
// node:sqlite is synchronous, so a batch runs start to end without yielding: no other
// query of this process can interleave, and BEGIN IMMEDIATE guards against other processes.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import { Kysely, SqliteDialect, type SqliteDatabase, type SqliteStatement } from 'kysely';
import { compile, type BatchResult, type Db, type RepeatDelete, type Statement } from '../database.ts';
import type { DeleteJob } from './node-sqlite-delete-worker.ts';
import type { Schema } from '../schema.ts';

const STATEMENT_CACHE_SIZE = 256;

/**
 * A prepared statement; a reader's rows come as arrays and are made plain objects here
 * (rowsOf). node:sqlite's own row objects are dictionary-mode (V8's slow properties): ~2.6 KB
 * per usage record read, and slower to read from; these are ordinary objects.
 */
interface Prepared {
  stmt: StatementSync;
  /** Read with all() (stepsToTheEnd), known once per statement. */
  reads: boolean;
  /** A reader's row maker; null for a statement that returns no rows. */
  row: RowMaker | null;
}

/** Makes one row object from its values, with the statement's columns as its own fields. */
type RowMaker = ((values: unknown[]) => Record<string, unknown>) & { width: number };

/** Adapts node:sqlite to the better-sqlite3 shape Kysely's SqliteDialect expects. */
class NodeSqliteAdapter implements SqliteDatabase {
  readonly raw: DatabaseSync;
  #cache = new Map<string, Prepared>();

  constructor(raw: DatabaseSync) {
    this.raw = raw;
  }

  statement(sql: string): Prepared {
    let p = this.#cache.get(sql);
    if (!p) {
      const stmt = this.raw.prepare(sql);
      const row = rowMaker(stmt);
      if (row) stmt.setReturnArrays(true);
      p = { stmt, reads: stepsToTheEnd(sql, stmt), row };
      if (this.#cache.size >= STATEMENT_CACHE_SIZE) this.#cache.delete(this.#cache.keys().next().value!);
      this.#cache.set(sql, p);
    }
    return p;
  }

  prepare(sql: string): SqliteStatement {
    const p = this.statement(sql);
    const params = (args: ReadonlyArray<unknown>) => args.map(toSqlite) as never[];
    return {
      reader: p.reads,
      all: (args) => rowsOf(p, p.stmt.all(...params(args))),
      run: (args) => p.stmt.run(...params(args)),
      iterate: (args) => objectsOf(p, p.stmt.iterate(...params(args)) as IterableIterator<unknown>),
    };
  }

  close(): void {
    this.#cache.clear();
    if (this.raw.isOpen) this.raw.close();
  }
}

/**
 * An object literal of the statement's columns, compiled once per statement: V8 gives its
 * objects one shape with in-object fields (the smallest and fastest). Node only (the edge
 * runtime allows no `new Function`; D1 makes its own rows).
 */
function rowMaker(stmt: StatementSync): RowMaker | null {
  const names = stmt.columns().map((c) => c.name);
  if (!names.length) return null;
  // quoted keys; a computed one for __proto__, which as a literal key would set the prototype
  const fields = names.map((n, i) => `${n === '__proto__' ? `[${JSON.stringify(n)}]` : JSON.stringify(n)}: v[${i}]`);
  const make = new Function('v', `return { ${fields.join(', ')} };`) as RowMaker;
  make.width = names.length;
  return make;
}

/** A reader's rows (arrays) as objects, in place; other statements' results as they are. */
function rowsOf(p: Prepared, rows: unknown[]): Record<string, unknown>[] {
  if (p.row) for (let r = 0; r < rows.length; r++) rows[r] = rowObject(p, rows[r] as unknown[]);
  return rows as Record<string, unknown>[];
}

function* objectsOf(p: Prepared, rows: IterableIterator<unknown>): IterableIterator<unknown> {
  for (const row of rows) yield p.row ? rowObject(p, row as unknown[]) : row;
}

function rowObject(p: Prepared, values: unknown[]): Record<string, unknown> {
  // SQLite prepares a statement again when the schema changes (a `SELECT *` after another
  // process's migration added or dropped a column): its columns are read again when their
  // number differs. (A renamed column keeps the old name here; migrations only add columns.)
  if (values.length !== p.row!.width) p.row = rowMaker(p.stmt) ?? p.row;
  return p.row!(values);
}

/**
 * Whether a statement is read with all(): any that returns columns, and every PRAGMA: run()
 * steps a statement once, and `PRAGMA incremental_vacuum(N)` frees one page per step.
 */
function stepsToTheEnd(sql: string, stmt: StatementSync): boolean {
  return stmt.columns().length > 0 || /^\s*PRAGMA\b/i.test(sql);
}

/** How long a statement waits for another process's write lock (SQLITE_BUSY_TIMEOUT_MS). */
const BUSY_TIMEOUT_MS = 10_000;

/**
 * Runs `f` again while it fails with SQLITE_BUSY, up to the busy timeout. Processes booting at
 * once on a new file each switch it to WAL; the switch upgrades a read lock to a write lock, and
 * SQLite answers that upgrade with SQLITE_BUSY at once, without its busy handler, when another
 * connection holds the write lock (deadlock avoidance). The pragmas are idempotent.
 */
function whileBusy(f: () => void, timeoutMs: number): void {
  const until = Date.now() + timeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      return f();
    } catch (e) {
      if ((e as { errcode?: number }).errcode !== 5 || Date.now() > until) throw e; // 5: SQLITE_BUSY
      Atomics.wait(pause, 0, 0, 5 + Math.random() * 20); // at boot only: a synchronous pause
    }
  }
}

/** node:sqlite binds neither booleans nor undefined. */
function toSqlite(v: unknown): unknown {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (v === undefined) return null;
  return v;
}

export function openNodeSqlite(path: string, opts: { busyTimeoutMs?: number } = {}): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const busyTimeoutMs = opts.busyTimeoutMs ?? BUSY_TIMEOUT_MS;
  const raw = new DatabaseSync(path, { timeout: busyTimeoutMs });
  try {
    whileBusy(() => {
      // A new file frees the pages of pruned usage back to the file system (usage/retention.ts);
      // an existing file keeps its mode until a VACUUM (docs/usage.md). Set before WAL: the
      // switch writes the file's first page, after which auto_vacuum no longer takes.
      raw.exec('PRAGMA auto_vacuum = INCREMENTAL');
      raw.exec('PRAGMA journal_mode = WAL');
    }, busyTimeoutMs);
    raw.exec('PRAGMA synchronous = NORMAL');
    raw.exec('PRAGMA foreign_keys = ON');
  } catch (e) {
    raw.close(); // a file locked past the busy timeout: the caller may try again
    throw e;
  }
  const adapter = new NodeSqliteAdapter(raw);
  const kysely = new Kysely<Schema>({ dialect: new SqliteDialect({ database: adapter }) });
  const running: Running = new Set();

  return {
    kysely,
    dialect: 'sqlite',
    async batch(queries: readonly Statement[]): Promise<BatchResult[]> {
      const compiled = queries.map(compile);
      const results: BatchResult[] = [];
      raw.exec('BEGIN IMMEDIATE');
      try {
        for (const { sql, parameters } of compiled) {
          const p = adapter.statement(sql);
          const args = parameters.map(toSqlite) as never[];
          if (p.reads) {
            const rows = rowsOf(p, p.stmt.all(...args));
            results.push({ rows, changes: rows.length });
          } else {
            results.push({ rows: [], changes: Number(p.stmt.run(...args).changes) });
          }
        }
        raw.exec('COMMIT');
      } catch (e) {
        if (raw.isTransaction) raw.exec('ROLLBACK');
        throw e;
      }
      return results;
    },
    ...(path === ':memory:' ? {} : { repeatDelete: (q: Statement, opts: RepeatDelete) => deleteOffLoop(path, busyTimeoutMs, q, opts, running) }),
    async close() {
      await Promise.all([...running].map((stop) => stop()));
      await kysely.destroy();
    },
  };
}

/** Each running delete worker's stop (which resolves once it has exited). */
type Running = Set<() => Promise<void>>;

/** repeatDelete(): node-sqlite-delete-worker.ts on a thread of its own, with its own connection to `path`. */
function deleteOffLoop(path: string, busyTimeoutMs: number, q: Statement, opts: RepeatDelete, running: Running): Promise<number> {
  const { sql, parameters } = compile(q);
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const job: DeleteJob = { path, busyTimeoutMs, sql, parameters: parameters.map(toSqlite) as DeleteJob['parameters'], batch: opts.batch, pace: opts.pace, after: opts.after, stop };
  const worker = new Worker(new URL('./node-sqlite-delete-worker.ts', import.meta.url), { workerData: job });
  const exited = new Promise<void>((r) => worker.once('exit', () => r()));
  const stopNow = () => {
    Atomics.store(stop, 0, 1);
    return exited;
  };
  running.add(stopNow);
  const poll = setInterval(() => opts.stopped?.() && Atomics.store(stop, 0, 1), 50);
  return new Promise<number>((resolve, reject) => {
    let deleted = 0;
    worker.on('message', (m: { deleted: number; done?: boolean; error?: { message: string; code?: string } }) => {
      deleted = m.deleted;
      if (m.error) reject(Object.assign(new Error(m.error.message), { code: m.error.code }));
      else if (m.done) resolve(deleted);
    });
    worker.on('error', reject);
    void exited.then(() => resolve(deleted)); // settled already, unless it exited early
  }).finally(() => {
    clearInterval(poll);
    running.delete(stopNow);
  });
}
