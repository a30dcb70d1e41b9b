// The Node runtime's database: PostgreSQL when DATABASE_URL is set, else the SQLite file.
// At boot, PostgreSQL may not accept connections yet (compose or Kubernetes start order, a
// failover): the process waits for it up to DATABASE_CONNECT_TIMEOUT_S, with backoff and one
// log line per attempt, then fails with the driver's own error as before.
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import { openNodeSqlite } from '../../db/dialects/node-sqlite.ts';
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { redactUrl, type NodeConfig } from './config.ts';

type DbSettings = Pick<NodeConfig, 'databaseUrl' | 'databasePath' | 'poolSize' | 'statementTimeoutMs'> & { connectTimeoutS?: number };

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
  return openNodeSqlite(c.databasePath);
}

/** Resolves once the database answers; throws its last error after connectTimeoutS. */
export async function waitForDatabase(db: Db, c: DbSettings, say: (line: string) => void): Promise<void> {
  const until = Date.now() + (c.connectTimeoutS ?? 60) * 1000;
  for (let attempt = 1, wait = 250; ; attempt++, wait = Math.min(wait * 2, 2000)) {
    try {
      await sql`SELECT 1`.execute(db.kysely);
      if (attempt > 1) say(`citygate: database ${redactUrl(c.databaseUrl ?? '')} is reachable (attempt ${attempt})`);
      return;
    } catch (e) {
      const left = until - Date.now();
      if (!isDatabaseUnavailable(e) || left <= 0) throw e;
      const next = Math.min(wait, left);
      say(`citygate: database not reachable (${(e as Error).message || (e as { code?: string }).code}); attempt ${attempt}, next in ${(next / 1000).toFixed(1)} s, giving up after DATABASE_CONNECT_TIMEOUT_S=${c.connectTimeoutS ?? 60}`);
      await new Promise((r) => setTimeout(r, next));
    }
  }
}
