import { CompiledQuery, sql } from 'kysely';
import type { Db } from './database.ts';
import { isUniqueViolation } from './database.ts';
import { migrations as all, type Migration } from './migrations/index.ts';

/**
 * Applies pending migrations. Each migration is one batch that also claims its row in
 * `_migrations`, so gateways booting at once on one new database apply it exactly once:
 * the loser's batch fails on the primary key and rolls back whole.
 */
export async function migrate(db: Db, migrations: Migration[] = all): Promise<string[]> {
  await sql`CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)`.execute(
    db.kysely,
  );
  const done = new Set((await db.kysely.selectFrom('_migrations').select('name').execute()).map((r) => r.name));
  const applied: string[] = [];
  for (const m of migrations) {
    if (done.has(m.name)) continue;
    try {
      await db.batch([
        db.kysely.insertInto('_migrations').values({ name: m.name, applied_at: Date.now() }),
        ...(typeof m.statements === 'function' ? m.statements(db.kysely) : m.statements.map((s) => CompiledQuery.raw(s))),
      ]);
      applied.push(m.name);
    } catch (e) {
      if (!isUniqueViolation(e)) throw e; // another process applied it first
    }
  }
  return applied;
}
