// The black-box API suites of the services that run a second time on PostgreSQL: all at once by
// test/postgres/suites.test.ts, or file by file among the other files by npm test (test/run.ts).
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');
const AREAS = ['kernel', 'money', 'accounts', 'ai', 'webhooks', 'usage', 'mcp'];
const EXTRA = ['test/cli/usage.test.ts', 'test/client/client.test.ts'];
// SQLite only, run once in the main run: GATEWAY_WORKERS on one file, and write failures made by
// an SQLite trigger installed into the gateway's file, secrets at rest read from the file's bytes.
const ONLY_SQLITE = new Set([
  'test/kernel/workers.test.ts',
  'test/kernel/rate-limit-workers.test.ts',
  // runs itself on SQLite and on PostgreSQL
  'test/kernel/rate-window.test.ts',
  'test/money/settle-failure.test.ts',
  'test/kernel/secrets.test.ts',
  // a second process on the same file, and write failures made by triggers in the file
  'test/kernel/env-shared.test.ts',
  'test/kernel/jobs.test.ts',
  'test/money/usage-sink-failures.test.ts',
]);

/** The suites' files, relative to the repository. */
export const POSTGRES_SUITES = [
  ...AREAS.flatMap((a) => readdirSync(join(ROOT, 'test', a)).filter((f) => f.endsWith('.test.ts')).map((f) => `test/${a}/${f}`)),
  ...EXTRA,
].filter((f) => !ONLY_SQLITE.has(f));

/** What the suites' gateways and helpers read to run on PostgreSQL (test/helpers/postgres.ts). */
export const POSTGRES_SUITES_ENV = { CITYGATE_TEST_DIALECT: 'postgres' } as const;

/** At most this many of these files at once on PostgreSQL (npm test, and test/postgres/suites.test.ts), beside the other files of a run: more exhaust the server's connections. */
export const POSTGRES_SUITES_CONCURRENCY = 3;
