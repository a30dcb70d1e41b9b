// npm test's setup, once for the whole run (test/run.ts), all at once:
//   - one database with every migration applied, on PostgreSQL and as a SQLite file, which the
//     test gateways' databases are copied from (CREATE DATABASE … TEMPLATE, a file copy) instead
//     of each running the migrations on its first boot (~0.15 s of CPU on SQLite, far more on
//     PostgreSQL). Removed at the end. Tests about first boots on a new database ask for a fresh
//     one (StartOptions.freshDatabase);
//   - the Worker's bundle (wrangler, ~3 s of CPU), which a dozen edge test files would each
//     make again. Removed at the end;
//   - the gateway's bundle, which the test gateways boot from (test/helpers/serve-bundle.ts);
//   - a run id, which its PostgreSQL databases are named after: each test process drops its own
//     as it exits, without waiting, and the end drops whatever of the run is left.
// A run started by another (the PostgreSQL suites) inherits them all through the environment.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate } from '../../src/db/migrate.ts';
import { openNodeSqlite } from '../../src/db/dialects/node-sqlite.ts';
import { openPostgres } from '../../src/db/dialects/postgres.ts';
import { SERVE_BUNDLE_ENV, SQLITE_TEMPLATE_ENV } from './gateway.ts';
import { createTestDatabase, dropRunDatabases, pgSkipReason, RUN_ENV, TEMPLATE_ENV } from './postgres.ts';
import { bundleServe } from './serve-bundle.ts';
import { bundleInto, SHARED_BUNDLE_ENV, WORKER_ENTRY } from './worker.ts';

let drop: (() => Promise<void>) | null = null;
let bundleDir: string | null = null;
let sqliteDir: string | null = null;
let serveDir: string | null = null;

let ownRun = false;

export async function globalSetup(): Promise<void> {
  // the run's PostgreSQL databases are named after it (swept at its end); a run started by another inherits it
  if (!process.env[RUN_ENV]) {
    process.env[RUN_ENV] = randomBytes(4).toString('hex');
    ownRun = true;
  }
  await Promise.all([postgresTemplate(), sqliteTemplate(), workerBundle(), serveBundle()]);
}

async function serveBundle(): Promise<void> {
  if (process.env[SERVE_BUNDLE_ENV]) return;
  const { dir, entry } = await bundleServe();
  serveDir = dir;
  process.env[SERVE_BUNDLE_ENV] = entry;
}

async function sqliteTemplate(): Promise<void> {
  if (process.env[SQLITE_TEMPLATE_ENV]) return;
  const dir = mkdtempSync(join(tmpdir(), 'citygate-template-'));
  const file = join(dir, 'citygate.sqlite');
  const db = openNodeSqlite(file);
  try {
    await migrate(db);
  } finally {
    await db.close(); // the last connection: its WAL is checkpointed into the file, which is copied whole
  }
  sqliteDir = dir;
  process.env[SQLITE_TEMPLATE_ENV] = file;
}

async function workerBundle(): Promise<void> {
  if (process.env[SHARED_BUNDLE_ENV]) return;
  const dir = mkdtempSync(join(tmpdir(), 'citygate-bundle-'));
  try {
    process.env[SHARED_BUNDLE_ENV] = await bundleInto(WORKER_ENTRY, dir);
    bundleDir = dir;
  } catch {
    // the edge tests bundle it themselves, and fail there with wrangler's words
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgresTemplate(): Promise<void> {
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
  for (const dir of [bundleDir, sqliteDir, serveDir]) if (dir) rmSync(dir, { recursive: true, force: true });
  await drop?.();
  if (ownRun) await dropRunDatabases();
}
