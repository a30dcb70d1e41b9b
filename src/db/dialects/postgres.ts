// PostgreSQL (`DATABASE_URL=postgres://…`): Kysely's PostgresDialect over a `pg` pool, for
// many processes and replicas on one database. Node only (never bundled into the Worker).
//
// What this file keeps away from the services, so they have one query path on all dialects:
//   - integers: every INTEGER column is BIGINT here (credits and epoch-ms outgrow int4), and
//     BIGINT, COUNT and SUM come back as JS numbers, not the strings `pg` returns by default;
//   - parameters: JS numbers are sent typed ($n::bigint / ::float8) and booleans as 1/0, so
//     `INSERT … SELECT $1, …` and arithmetic on parameters type-check as they do on SQLite;
//   - `Db.batch`: one READ COMMITTED transaction on one pooled client, retried whole on a
//     deadlock. The money batches are guarded INSERT … SELECT … WHERE <guard> statements written
//     for SQLite, where a batch runs alone; here two of them could read the same balance and
//     both pass their guard, so their read locks the balance row (`lockRowsOf` in database.ts):
//     the second waits, and PostgreSQL re-checks its guard against the committed row.
//     (SERIALIZABLE was the first design: correct, but a hot balance — one user, many calls at
//     once — turned into a storm of serialization failures and retries: ~10 calls/s.)
import pg from 'pg';
import { CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import { randomUUID } from 'node:crypto';
import { compile, type BatchResult, type ChangeFeed, type Db, type Statement } from '../database.ts';
import type { Schema } from '../schema.ts';

export interface PostgresOptions {
  /** Connections per process (DATABASE_POOL_SIZE, default 10). */
  poolSize?: number;
  /** Longest a statement may run, ms (DATABASE_STATEMENT_TIMEOUT_MS, default 30 000). */
  statementTimeoutMs?: number;
  /** Longest a new connection may take to open, ms (default 5000). */
  connectTimeoutMs?: number;
}

const ignore = () => {};

const INT8 = 20;
const NUMERIC = 1700;

/** BIGINT as a JS number (every integer citygate stores is a safe integer). */
function parseInt8(v: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new Error(`integer out of the safe range: ${v}`);
  return n;
}

const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8) return parseInt8;
    if (oid === NUMERIC) return (v: string) => Number(v); // SUM(bigint) is NUMERIC
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

/**
 * Gives every number parameter an explicit type. Without it PostgreSQL types a parameter from
 * its context, and an `INSERT … SELECT $1` output column has none (it becomes text).
 */
export function typedParameters(text: string, values: readonly unknown[]): { text: string; values: unknown[] } {
  const out = values.map((v) => (typeof v === 'boolean' ? (v ? 1 : 0) : typeof v === 'bigint' ? Number(v) : v === undefined ? null : v));
  if (!out.some((v) => typeof v === 'number')) return { text, values: out };
  const typed = text.replace(/\$(\d+)(?![\d:])/g, (m, i: string) => {
    const v = out[Number(i) - 1];
    if (typeof v !== 'number') return m;
    return Number.isInteger(v) ? `${m}::bigint` : `${m}::float8`;
  });
  return { text: typed, values: out };
}

/** A pg Client whose parameterized queries go through typedParameters. */
class TypedClient extends pg.Client {
  // biome-ignore lint: pg's overloads
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config === 'string' && Array.isArray(values)) {
      const t = typedParameters(config, values);
      return super.query(t.text, t.values, callback);
    }
    return super.query(config, values, callback);
  }
}

/** Like node-sqlite: a statement that returns columns counts its rows, others their changes. */
function toBatchResult(r: pg.QueryResult): BatchResult {
  const returns = r.fields && r.fields.length > 0;
  return { rows: r.rows, changes: returns ? r.rows.length : (r.rowCount ?? 0) };
}

/**
 * The whole batch as one simple-protocol query ("BEGIN; …; COMMIT"), its parameters written as
 * escaped literals: one round trip, so a row lock taken inside is held for the server's work
 * only, not for a client round trip per statement (a hot balance serializes on that lock).
 * Null when a parameter is not a plain string, number or null (then: one statement at a time).
 */
function oneRoundTrip(client: pg.PoolClient, compiled: CompiledQuery[]): string | null {
  const parts = ['BEGIN ISOLATION LEVEL READ COMMITTED'];
  for (const q of compiled) {
    if (q.parameters.length === 0) {
      parts.push(q.sql);
      continue;
    }
    const { text, values } = typedParameters(q.sql, q.parameters);
    const literals: string[] = [];
    for (const v of values) {
      if (v === null) literals.push('NULL');
      else if (typeof v === 'number' && Number.isFinite(v)) literals.push(`(${v})`); // parenthesized: "- -1" must never become "--1", a comment
      else if (typeof v === 'string') literals.push(client.escapeLiteral(v));
      else return null;
    }
    parts.push(text.replace(/\$(\d+)/g, (_, i: string) => literals[Number(i) - 1]));
  }
  parts.push('COMMIT');
  return parts.join(';\n');
}

const RETRYABLE = new Set(['40001', '40P01']); // serialization_failure, deadlock_detected
const MAX_BATCH_MS = 20_000;

export function openPostgres(url: string, opts: PostgresOptions = {}): Db {
  const pool = new pg.Pool({
    connectionString: url,
    Client: TypedClient,
    max: opts.poolSize ?? 10,
    statement_timeout: opts.statementTimeoutMs ?? 30_000,
    idleTimeoutMillis: 30_000,
    // A server that does not answer the connect at all (a network cut, not a refusal) fails the
    // call after this rather than holding it.
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
    types,
  } as pg.PoolConfig);
  // A client losing its connection (a database restart, a failover, an admin shutdown) must
  // never crash the process: pg emits 'error' on the client, and pg-pool listens only while the
  // client is idle in the pool. So every client gets a listener of its own for its whole life.
  // The query in flight fails on its own (the caller answers 503, see db/unavailable.ts); the
  // broken client is dropped on release (it is no longer queryable) and the pool opens fresh
  // ones once the server is back.
  pool.on('error', ignore);
  pool.on('connect', (client) => client.on('error', ignore));
  const kysely = new Kysely<Schema>({ dialect: new PostgresDialect({ pool }) });

  async function runBatch(client: pg.PoolClient, compiled: CompiledQuery[]): Promise<BatchResult[]> {
    const one = oneRoundTrip(client, compiled);
    if (one !== null) {
      try {
        const rs = (await client.query(one)) as unknown as pg.QueryResult[];
        // [BEGIN, …statements, COMMIT]
        return rs.slice(1, -1).map(toBatchResult);
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw e;
      }
    }
    const results: BatchResult[] = [];
    await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
    try {
      for (const q of compiled) {
        results.push(toBatchResult(await client.query(q.sql, q.parameters as unknown[])));
      }
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    }
    return results;
  }

  const changes = changeFeed(url, pool);
  return {
    kysely,
    dialect: 'postgres',
    changes,
    async batch(queries: readonly Statement[]): Promise<BatchResult[]> {
      if (queries.length === 0) return [];
      const compiled = queries.map(compile);
      const started = Date.now();
      for (let attempt = 1; ; attempt++) {
        const client = await pool.connect();
        try {
          return await runBatch(client, compiled);
        } catch (e) {
          const code = (e as { code?: string }).code;
          if (!code || !RETRYABLE.has(code) || Date.now() - started > MAX_BATCH_MS) throw e;
        } finally {
          client.release();
        }
        // Back off with jitter so the losers of a contended row do not collide again at once.
        await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 ** Math.min(attempt, 6))));
      }
    },
    async close() {
      await changes.close();
      await kysely.destroy(); // ends the pool
    },
  };
}

const CHANNEL = 'citygate_changes';

/**
 * LISTEN/NOTIFY: one extra connection per process, opened at the first subscribe, reopened
 * after a loss (meanwhile the caches' time bounds still hold). A process ignores its own notices.
 */
function changeFeed(url: string, pool: pg.Pool): ChangeFeed & { close(): Promise<void> } {
  const me = randomUUID();
  const subscribers: ((topic: string, key: string) => void)[] = [];
  let client: pg.Client | null = null;
  let closed = false;
  let retry: ReturnType<typeof setTimeout> | null = null;

  const listen = async () => {
    if (closed || client) return;
    const c = new pg.Client({ connectionString: url });
    client = c;
    const lost = () => {
      if (client !== c) return;
      client = null;
      c.end().catch(() => {});
      if (!closed) {
        retry = setTimeout(() => void listen(), 1000);
        retry.unref();
      }
    };
    c.on('error', lost);
    c.on('end', lost);
    c.on('notification', (n) => {
      if (!n.payload) return;
      try {
        const { from, topic, key } = JSON.parse(n.payload) as { from: string; topic: string; key: string };
        if (from === me) return;
        for (const fn of subscribers) fn(topic, key);
      } catch {
        /* not ours */
      }
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${CHANNEL}`);
    } catch {
      lost();
    }
  };

  return {
    publish(topic, key) {
      if (closed) return;
      pool.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify({ from: me, topic, key })]).catch(() => {});
    },
    subscribe(fn) {
      subscribers.push(fn);
      void listen();
    },
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      const c = client;
      client = null;
      await c?.end().catch(() => {});
    },
  };
}
