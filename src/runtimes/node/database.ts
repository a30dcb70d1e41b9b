// The Node runtime's database: PostgreSQL when DATABASE_URL is set, else the SQLite file.
import type { Db } from '../../db/database.ts';
import { openNodeSqlite } from '../../db/dialects/node-sqlite.ts';
import type { NodeConfig } from './config.ts';

export async function openNodeDatabase(c: Pick<NodeConfig, 'databaseUrl' | 'databasePath' | 'poolSize' | 'statementTimeoutMs'>): Promise<Db> {
  if (c.databaseUrl) {
    const { openPostgres } = await import('../../db/dialects/postgres.ts'); // loads `pg` only when used
    return openPostgres(c.databaseUrl, { poolSize: c.poolSize, statementTimeoutMs: c.statementTimeoutMs });
  }
  return openNodeSqlite(c.databasePath);
}
