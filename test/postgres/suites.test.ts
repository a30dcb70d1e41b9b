// The black-box API suites of the services, a second time on PostgreSQL: the same files, with
// every gateway (and the in-process billing test) on a fresh PostgreSQL database of its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { pgSkipReason } from '../helpers/postgres.ts';

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
const SUITES = [
  ...AREAS.flatMap((a) => readdirSync(join(ROOT, 'test', a)).filter((f) => f.endsWith('.test.ts')).map((f) => `test/${a}/${f}`)),
  ...EXTRA,
].filter((f) => !ONLY_SQLITE.has(f));

const skip = await pgSkipReason();

test('the service suites pass on PostgreSQL', { skip, timeout: 900_000 }, async () => {
  // test/run.ts: the slowest files first here too; three at once beside the main run's files
  const child = spawn(process.execPath, ['test/run.ts', '--concurrency=3', ...SUITES], {
    cwd: ROOT,
    env: { ...process.env, CITYGATE_TEST_DIALECT: 'postgres', NODE_TEST_CONTEXT: undefined },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  const summary = out.split('\n').filter((l) => /^ℹ (tests|pass|fail|skipped) /.test(l)).join('; ');
  const failures = out.slice(Math.max(0, out.indexOf('✖ failing tests:')));
  assert.equal(code, 0, `the service suites failed on PostgreSQL (${summary}):\n${failures.slice(0, 20_000)}`);
  assert.match(summary, /ℹ fail 0/);
  assert.doesNotMatch(summary, /ℹ tests 0\b/, 'no test ran');
});
