import { CompiledQuery, sql } from 'kysely';
import type { Db } from './database.ts';
import { isUniqueViolation } from './database.ts';
import { postgresDdl } from './dialects/postgres-ddl.ts';
import { migrations as all, type Migration, type MigrationStatement } from './migrations/index.ts';

/** A migration statement in the SQL of the database's dialect. */
export function statementFor(db: Db, s: MigrationStatement): string {
  if (typeof s !== 'string') return db.dialect === 'postgres' ? s.postgres : s.sqlite;
  return db.dialect === 'postgres' ? postgresDdl(s) : s;
}

// On PostgreSQL concurrent DDL can fail on catalog races (two CREATE TABLE IF NOT EXISTS at
// once), so every migration batch first takes one transaction-scoped advisory lock.
const LOCK_KEY = 7_141_592_653; // any fixed number; names "citygate migrations"

/**
 * Applies pending migrations. Each migration is one batch that also claims its row in
 * `_migrations`, so gateways booting at once on one new database apply it exactly once:
 * the loser's batch fails on the primary key and rolls back whole.
 */
export async function migrate(db: Db, migrations: Migration[] = all): Promise<string[]> {
  const lock = db.dialect === 'postgres' ? [CompiledQuery.raw(`SELECT pg_advisory_xact_lock(${LOCK_KEY})`)] : [];
  await db.batch([
    ...lock,
    CompiledQuery.raw(statementFor(db, `CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)`)),
  ]);
  const done = new Set((await db.kysely.selectFrom('_migrations').select('name').execute()).map((r) => r.name));
  const applied: string[] = [];
  for (const m of migrations) {
    if (done.has(m.name)) continue;
    try {
      await db.batch([
        ...lock,
        db.kysely.insertInto('_migrations').values({ name: m.name, applied_at: Date.now() }),
        ...(typeof m.statements === 'function' ? m.statements(db.kysely) : m.statements.map((s) => CompiledQuery.raw(statementFor(db, s)))),
      ]);
      applied.push(m.name);
    } catch (e) {
      if (!isUniqueViolation(e)) throw e; // another process applied it first
    }
  }
  return applied;
}
