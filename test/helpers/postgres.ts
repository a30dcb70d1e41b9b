// PostgreSQL for tests: CITYGATE_TEST_DATABASE_URL names a server (.ci/run sets it); every
// test database is created fresh here and dropped when the test process exits.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const TEST_PG_URL = process.env.CITYGATE_TEST_DATABASE_URL || '';

/** Service suites run against PostgreSQL instead of SQLite when this is set (test/postgres/suites.test.ts sets it). */
export const ON_POSTGRES = process.env.CITYGATE_TEST_DIALECT === 'postgres';

const HOW = 'set CITYGATE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test (as .ci/run does) to run them';

let reachable: Promise<string | false> | null = null;

/** False when PostgreSQL tests can run, else the one line that says why they are skipped and how to run them. */
export function pgSkipReason(): Promise<string | false> {
  reachable ??= (async () => {
    if (!TEST_PG_URL) return `PostgreSQL tests skipped: CITYGATE_TEST_DATABASE_URL is not set; ${HOW}`;
    const c = new pg.Client({ connectionString: TEST_PG_URL, connectionTimeoutMillis: 3000 });
    try {
      await c.connect();
      await c.query('SELECT 1');
      return false;
    } catch (e) {
      return `PostgreSQL tests skipped: no server at ${TEST_PG_URL} (${(e as Error).message}); start it, or unset CITYGATE_TEST_DATABASE_URL`;
    } finally {
      await c.end().catch(() => {});
    }
  })();
  return reachable;
}

/** The URL of another database on the same server. */
export function databaseUrl(name: string): string {
  const u = new URL(TEST_PG_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

const created = new Set<string>();

/** npm test's run (set by its global setup): its databases' names begin with it, so its end can sweep exactly them. */
export const RUN_ENV = 'CITYGATE_TEST_PG_RUN';
const runPrefix = () => (process.env[RUN_ENV] ? `citygate_t_${process.env[RUN_ENV]}_` : 'citygate_t_');

// Drops the databases named after the server URL, 4 at once. Each DROP DATABASE waits for a
// checkpoint of the whole server; drops at once share them. A server that stops answering does
// not keep it alive past a minute (what it left is named citygate_t_…, to drop by hand).
const DROP_SCRIPT = `import pg from 'pg';
  setTimeout(() => process.exit(1), 60_000).unref();
  const [url, ...names] = process.argv.slice(1);
  const one = async () => {
    for (let n; (n = names.shift()); ) {
      const c = new pg.Client({ connectionString: url });
      try {
        await c.connect();
        await c.query('DROP DATABASE IF EXISTS "' + n + '" WITH (FORCE)');
      } catch {}
      await c.end().catch(() => {});
    }
  };
  await Promise.all([one(), one(), one(), one()]);`;

process.once('exit', () => {
  if (created.size === 0) return;
  // 'exit' handlers cannot wait, and the file's answer need not wait for the drops (1.8 s each,
  // serially 10–14 s for a file with seven): a detached child drops them after this process is
  // gone. npm test's end sweeps what is left of its run (dropRunDatabases).
  spawn(process.execPath, ['--input-type=module', '-e', DROP_SCRIPT, TEST_PG_URL, ...created], {
    stdio: 'ignore',
    detached: true,
    cwd: import.meta.dirname,
  }).unref();
});

/** The end of npm test: drops every database of this run still there (the exit-time drops may still be under way), and waits for them. */
export async function dropRunDatabases(): Promise<void> {
  if (!process.env[RUN_ENV] || (await pgSkipReason())) return;
  const c = new pg.Client({ connectionString: TEST_PG_URL });
  await c.connect();
  let names: string[];
  try {
    const prefix = runPrefix();
    const r = await c.query<{ datname: string }>('SELECT datname FROM pg_database WHERE left(datname, $1) = $2', [prefix.length, prefix]);
    names = r.rows.map((x) => x.datname);
  } finally {
    await c.end();
  }
  if (names.length === 0) return;
  const child = spawn(process.execPath, ['--input-type=module', '-e', DROP_SCRIPT, TEST_PG_URL, ...names], { stdio: 'ignore', cwd: import.meta.dirname });
  await new Promise((resolve) => child.once('close', resolve));
}

/** The migrated database that npm test's global setup made (test/helpers/global-setup.ts), if any. */
export const TEMPLATE_ENV = 'CITYGATE_TEST_PG_TEMPLATE';

export interface TestDatabaseOptions {
  /** A copy of the global setup's migrated database when there is one; else empty (the default). */
  migrated?: boolean;
  /** Not dropped when this process exits (the global setup's template outlives its process). */
  keep?: boolean;
}

/** Creates a database for one test (dropped at exit, or by the returned drop()). */
export async function createTestDatabase(opts: TestDatabaseOptions = {}): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `${runPrefix()}${randomBytes(6).toString('hex')}`;
  const template = opts.migrated ? process.env[TEMPLATE_ENV] : undefined;
  // A copy of the migrated template saves a first boot its migrations: ~1 s quiet, far more when
  // the suite's load is on the disk. CREATE DATABASE copies only a database nobody is connected to:
  // the template's only connection, its migration, closed before the tests began.
  await admin(template ? `CREATE DATABASE "${name}" TEMPLATE "${template}"` : `CREATE DATABASE "${name}" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`);
  // A commit answers before its WAL reaches the disk: what every session sees is the same, only
  // a crash of this shared server could lose the last commits, and no test crashes it (the
  // restart tests run a server of their own). Under the suite's load every commit waited on the
  // disk: a gateway's first boot on PostgreSQL (its migrations) took 37–40 s, 17–18 s without.
  await admin(`ALTER DATABASE "${name}" SET synchronous_commit = off`);
  if (!opts.keep) created.add(name);
  return {
    name,
    url: databaseUrl(name),
    async drop() {
      await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      created.delete(name);
    },
  };
}

async function admin(text: string): Promise<void> {
  const c = new pg.Client({ connectionString: TEST_PG_URL });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}
