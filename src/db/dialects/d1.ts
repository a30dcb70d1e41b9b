// Cloudflare D1: Kysely's SQLite adapter, compiler and introspector over a D1 binding.
// D1 has no interactive transactions, so the driver refuses `transaction()` and
// `Db.batch` maps to `D1Database.batch`, which D1 runs atomically as one implicit
// transaction. Only Web-standard APIs here: this file is bundled into the Worker.
//
// Why not the `kysely-d1` package: it targets Kysely 0.23 typings, has no batch support
// and drops zero change counts; the part that matters is the ~60 lines below.
import {
  Kysely,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type QueryCompiler,
  type QueryResult,
} from 'kysely';
import { compile, type BatchResult, type Db, type Statement } from '../database.ts';
import type { Schema } from '../schema.ts';

// The slice of the Workers runtime's D1 types this dialect uses (structural, so shared code
// needs no ambient Workers typings).
export interface D1Result<T = Record<string, unknown>> {
  results?: T[];
  success: boolean;
  meta: { changes?: number; last_row_id?: number | null; [k: string]: unknown };
  error?: string;
}

export interface D1PreparedStatement {
  bind(...values: unknown[]): D1PreparedStatement;
  all<T = Record<string, unknown>>(): Promise<D1Result<T>>;
}

export interface D1Database {
  prepare(query: string): D1PreparedStatement;
  batch<T = Record<string, unknown>>(statements: D1PreparedStatement[]): Promise<D1Result<T>[]>;
}

export interface D1DialectConfig {
  database: D1Database;
}

export class D1Dialect implements Dialect {
  readonly #config: D1DialectConfig;

  constructor(config: D1DialectConfig) {
    this.#config = config;
  }

  createAdapter(): DialectAdapter {
    return new SqliteAdapter();
  }

  createDriver(): Driver {
    return new D1Driver(this.#config.database);
  }

  createQueryCompiler(): QueryCompiler {
    return new SqliteQueryCompiler();
  }

  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new SqliteIntrospector(db);
  }
}

const NO_TRANSACTIONS =
  'D1 has no interactive transactions: make the write one statement, or use Db.batch (atomic).';

class D1Driver implements Driver {
  readonly #connection: D1Connection;

  constructor(database: D1Database) {
    this.#connection = new D1Connection(database);
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    return this.#connection; // stateless: D1 is reached over the binding per query
  }

  async beginTransaction(): Promise<void> {
    throw new Error(NO_TRANSACTIONS);
  }

  async commitTransaction(): Promise<void> {
    throw new Error(NO_TRANSACTIONS);
  }

  async rollbackTransaction(): Promise<void> {
    throw new Error(NO_TRANSACTIONS);
  }

  async releaseConnection(): Promise<void> {}

  async destroy(): Promise<void> {}
}

/** D1 binds neither booleans nor undefined the way SQLite callers expect. */
function toD1(v: unknown): unknown {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (v === undefined) return null;
  if (typeof v === 'bigint') return Number(v);
  return v;
}

export function prepare(database: D1Database, q: CompiledQuery): D1PreparedStatement {
  const stmt = database.prepare(q.sql);
  return q.parameters.length > 0 ? stmt.bind(...q.parameters.map(toD1)) : stmt;
}

function toQueryResult<R>(res: D1Result): QueryResult<R> {
  if (res.error) throw new Error(res.error);
  const changes = res.meta?.changes;
  const lastRowId = res.meta?.last_row_id;
  return {
    rows: (res.results ?? []) as R[],
    numAffectedRows: typeof changes === 'number' ? BigInt(changes) : undefined,
    insertId: typeof lastRowId === 'number' ? BigInt(lastRowId) : undefined,
  };
}

class D1Connection implements DatabaseConnection {
  readonly #db: D1Database;

  constructor(db: D1Database) {
    this.#db = db;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    return toQueryResult<R>(await prepare(this.#db, compiledQuery).all());
  }

  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('D1 does not stream query results; page with limit/offset or a cursor.');
  }
}

/** The gateway's Db over a D1 binding. */
export function openD1(database: D1Database): Db {
  const kysely = new Kysely<Schema>({ dialect: new D1Dialect({ database }) });
  return {
    kysely,
    dialect: 'd1',
    async batch(queries: readonly Statement[]): Promise<BatchResult[]> {
      if (queries.length === 0) return [];
      const results = await database.batch(queries.map((q) => prepare(database, compile(q))));
      return results.map((r) => {
        if (r.error) throw new Error(r.error);
        const rows = r.results ?? [];
        // Like node-sqlite: a statement that returns rows counts its rows, others their changes.
        return { rows, changes: rows.length > 0 ? rows.length : Number(r.meta?.changes ?? 0) };
      });
    },
    async close() {
      await kysely.destroy();
    },
  };
}
