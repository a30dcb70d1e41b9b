// npm test's setup, once for the whole run (--test-global-setup): on PostgreSQL, one database
// with every migration applied, which the test gateways' databases are copied from (CREATE
// DATABASE … TEMPLATE) instead of each running the migrations on its first boot. Dropped at the
// end. Tests about first boots on a new database ask for a fresh one (StartOptions.freshDatabase).
import { migrate } from '../../src/db/migrate.ts';
import { openPostgres } from '../../src/db/dialects/postgres.ts';
import { createTestDatabase, pgSkipReason, TEMPLATE_ENV } from './postgres.ts';

let drop: (() => Promise<void>) | null = null;

export async function globalSetup(): Promise<void> {
  // a run started by another (the PostgreSQL suites, test/run.ts) uses the template it made
  if (process.env[TEMPLATE_ENV] || (await pgSkipReason())) return;
  const template = await createTestDatabase({ keep: true });
  try {
    const db = openPostgres(template.url);
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
  } catch (e) {
    await template.drop(); // kept from the exit-time drop: a failed setup must not leave it behind
    throw e;
  }
  drop = template.drop;
  process.env[TEMPLATE_ENV] = template.name; // the test processes (and the PostgreSQL suites' run) inherit it
}

export async function globalTeardown(): Promise<void> {
  await drop?.();
}
