// The Node runtime's database: PostgreSQL when DATABASE_URL is set, else the SQLite file.
// At boot, PostgreSQL may not accept connections yet (compose or Kubernetes start order, a
// failover): the process waits for it up to DATABASE_CONNECT_TIMEOUT_S, with backoff and one
// log line per attempt, then fails with the driver's own error as before.
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import { openNodeSqlite } from '../../db/dialects/node-sqlite.ts';
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { describeDatabase, type NodeConfig } from './config.ts';

type DbSettings = Pick<NodeConfig, 'databaseUrl' | 'databasePath' | 'poolSize' | 'statementTimeoutMs'> & { connectTimeoutS?: number; sqliteBusyTimeoutMs?: number };

export async function openNodeDatabase(c: DbSettings, say: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<Db> {
  if (c.databaseUrl) {
    const { openPostgres } = await import('../../db/dialects/postgres.ts'); // loads `pg` only when used
    const db = openPostgres(c.databaseUrl, { poolSize: c.poolSize, statementTimeoutMs: c.statementTimeoutMs });
    try {
      await waitForDatabase(db, c, say);
    } catch (e) {
      await db.close().catch(() => {});
      throw e;
    }
    return db;
  }
  return whileUnavailable(async () => openNodeSqlite(c.databasePath, { busyTimeoutMs: c.sqliteBusyTimeoutMs }), c, say);
}

/** Resolves once the database answers; throws its last error after connectTimeoutS. */
export function waitForDatabase(db: Db, c: DbSettings, say: (line: string) => void): Promise<void> {
  return whileUnavailable(async () => void (await sql`SELECT 1`.execute(db.kysely)), c, say);
}

/**
 * Runs `step` again while the database is unavailable (a PostgreSQL that is not up yet, a
 * SQLite file another process holds locked), with backoff and one log line per attempt, up to
 * DATABASE_CONNECT_TIMEOUT_S; then throws its last error. For steps safe to repeat.
 */
export async function whileUnavailable<T>(step: () => Promise<T>, c: DbSettings, say: (line: string) => void): Promise<T> {
  const until = Date.now() + (c.connectTimeoutS ?? 60) * 1000;
  for (let attempt = 1, wait = 250; ; attempt++, wait = Math.min(wait * 2, 2000)) {
    try {
      const done = await step();
      if (attempt > 1) say(`citygate: database ${describeDatabase(c)} is reachable (attempt ${attempt})`);
      return done;
    } catch (e) {
      const left = until - Date.now();
      if (!isDatabaseUnavailable(e) || left <= 0) throw e;
      const next = Math.min(wait, left);
      say(`citygate: database not reachable (${(e as Error).message || (e as { code?: string }).code}); attempt ${attempt}, next in ${(next / 1000).toFixed(1)} s, giving up after DATABASE_CONNECT_TIMEOUT_S=${c.connectTimeoutS ?? 60}`);
      await new Promise((r) => setTimeout(r, next));
    }
  }
}
