// The black-box API suites of the services, a second time on PostgreSQL: the same files, with
// every gateway (and the in-process billing test) on a fresh PostgreSQL database of its own.
// `node --test test/postgres/suites.test.ts` runs them; npm test runs the same files directly.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { pgSkipReason } from '../helpers/postgres.ts';
import { POSTGRES_SUITES, POSTGRES_SUITES_CONCURRENCY, POSTGRES_SUITES_ENV } from '../helpers/postgres-suites.ts';

const ROOT = resolve(import.meta.dirname, '../..');

const skip = await pgSkipReason();

test('the service suites pass on PostgreSQL', { skip, timeout: 900_000 }, async () => {
  // test/run.ts: the slowest files first here too. (npm test runs these files itself, among its
  // others, instead of this file.)
  const child = spawn(process.execPath, ['test/run.ts', `--concurrency=${POSTGRES_SUITES_CONCURRENCY}`, ...POSTGRES_SUITES], {
    cwd: ROOT,
    env: { ...process.env, ...POSTGRES_SUITES_ENV, NODE_TEST_CONTEXT: undefined },
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
