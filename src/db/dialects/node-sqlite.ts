// The embedded default: Kysely's SQLite dialect driven by Node's built-in `node:sqlite`.
// node:sqlite is synchronous, so a batch runs start to end without yielding: no other
// query of this process can interleave, and BEGIN IMMEDIATE guards against other processes.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { Kysely, SqliteDialect, type SqliteDatabase, type SqliteStatement } from 'kysely';
import { compile, type BatchResult, type Db, type Statement } from '../database.ts';
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
      reader: stmt.columns().length > 0,
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

/** node:sqlite binds neither booleans nor undefined. */
function toSqlite(v: unknown): unknown {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (v === undefined) return null;
  return v;
}

export function openNodeSqlite(path: string): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const raw = new DatabaseSync(path, { timeout: 10_000 });
  raw.exec('PRAGMA journal_mode = WAL');
  raw.exec('PRAGMA synchronous = NORMAL');
  raw.exec('PRAGMA foreign_keys = ON');
  const adapter = new NodeSqliteAdapter(raw);
  const kysely = new Kysely<Schema>({ dialect: new SqliteDialect({ database: adapter }) });

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
          if (stmt.columns().length > 0) {
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
    async close() {
      await kysely.destroy();
    },
  };
}
