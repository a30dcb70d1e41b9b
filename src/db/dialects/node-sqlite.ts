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

/** Adapts node:sqlite to the better-sqlite3 shape Kysely's SqliteDialect expects. */
class NodeSqliteAdapter implements SqliteDatabase {
  readonly raw: DatabaseSync;
  #cache = new Map<string, StatementSync>();

  constructor(raw: DatabaseSync) {
    this.raw = raw;
  }

  statement(sql: string): StatementSync {
    let stmt = this.#cache.get(sql);
    if (!stmt) {
      stmt = this.raw.prepare(sql);
      if (this.#cache.size >= STATEMENT_CACHE_SIZE) this.#cache.delete(this.#cache.keys().next().value!);
      this.#cache.set(sql, stmt);
    }
    return stmt;
  }

  prepare(sql: string): SqliteStatement {
    const stmt = this.statement(sql);
    const params = (p: ReadonlyArray<unknown>) => p.map(toSqlite) as never[];
    return {
      reader: stepsToTheEnd(sql, stmt),
      all: (p) => stmt.all(...params(p)),
      run: (p) => stmt.run(...params(p)),
      iterate: (p) => stmt.iterate(...params(p)) as IterableIterator<unknown>,
    };
  }

  close(): void {
    this.#cache.clear();
    if (this.raw.isOpen) this.raw.close();
  }
}

/**
 * Whether a statement is read with all(): any that returns columns, and every PRAGMA: run()
 * steps a statement once, and `PRAGMA incremental_vacuum(N)` frees one page per step.
 */
function stepsToTheEnd(sql: string, stmt: StatementSync): boolean {
  return stmt.columns().length > 0 || /^\s*PRAGMA\b/i.test(sql);
}

const BUSY_TIMEOUT_MS = 10_000;

/**
 * Runs `f` again while it fails with SQLITE_BUSY, up to the busy timeout. Processes booting at
 * once on a new file each switch it to WAL; the switch upgrades a read lock to a write lock, and
 * SQLite answers that upgrade with SQLITE_BUSY at once, without its busy handler, when another
 * connection holds the write lock (deadlock avoidance). The pragmas are idempotent.
 */
function whileBusy(f: () => void): void {
  const until = Date.now() + BUSY_TIMEOUT_MS;
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

export function openNodeSqlite(path: string): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const raw = new DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS });
  try {
    whileBusy(() => {
      // A new file frees the pages of pruned usage back to the file system (usage/retention.ts);
      // an existing file keeps its mode until a VACUUM (docs/usage.md). Set before WAL: the
      // switch writes the file's first page, after which auto_vacuum no longer takes.
      raw.exec('PRAGMA auto_vacuum = INCREMENTAL');
      raw.exec('PRAGMA journal_mode = WAL');
    });
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
          const stmt = adapter.statement(sql);
          const args = parameters.map(toSqlite) as never[];
          if (stepsToTheEnd(sql, stmt)) {
            const rows = stmt.all(...args) as Record<string, unknown>[];
            results.push({ rows, changes: rows.length });
          } else {
            results.push({ rows: [], changes: Number(stmt.run(...args).changes) });
          }
        }
        raw.exec('COMMIT');
      } catch (e) {
        if (raw.isTransaction) raw.exec('ROLLBACK');
        throw e;
      }
      return results;
    },
    ...(path === ':memory:' ? {} : { repeatDelete: (q: Statement, opts: RepeatDelete) => deleteOffLoop(path, q, opts, running) }),
    async close() {
      await Promise.all([...running].map((stop) => stop()));
      await kysely.destroy();
    },
  };
}

/** Each running delete worker's stop (which resolves once it has exited). */
type Running = Set<() => Promise<void>>;

/** repeatDelete(): node-sqlite-delete-worker.ts on a thread of its own, with its own connection to `path`. */
function deleteOffLoop(path: string, q: Statement, opts: RepeatDelete, running: Running): Promise<number> {
  const { sql, parameters } = compile(q);
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const job: DeleteJob = { path, sql, parameters: parameters.map(toSqlite) as DeleteJob['parameters'], batch: opts.batch, pace: opts.pace, after: opts.after, stop };
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
