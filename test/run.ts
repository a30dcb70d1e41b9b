// npm test: the suite through node:test's run(), which starts files in the order it is given.
// `node --test` sorts its files by name, so a long file whose name sorts late started late and
// ran alone at the end (the PostgreSQL suites began 233 s into a 455 s run and made its last
// 134 s). Here the slowest known files start first and the rest follow by name.
//
//   node test/run.ts [--concurrency=N] [file ...]     (default: test/**/*.test.ts, 6 at once)
//
// The global setup (a migrated PostgreSQL template, test/helpers/global-setup.ts) runs once;
// a run started by another (the PostgreSQL suites) inherits its template.
import { globSync } from 'node:fs';
import { resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { run, type RunOptions } from 'node:test';
import { spec } from 'node:test/reporters';
import type { TestEvent } from 'node:test/reporters';
import slowestFiles from './reporters/slowest-files.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** The longest files of a run on 2 cores, longest first: they start first, so none is left running alone at the end. */
export const SLOW_FIRST = [
  'test/postgres/suites.test.ts',
  'test/client/readme.test.ts',
  'test/edge/deploy.test.ts',
  'test/console/console.test.ts',
  'test/usage/export.test.ts',
  'test/kernel/drain.test.ts',
  'test/console/limits-upstreams.test.ts',
  'test/accounts/keys.test.ts',
  'test/edge/security.test.ts',
  'test/usage/partitions.test.ts',
  'test/userpage/userpage.test.ts',
  'test/postgres/restart.test.ts',
  'test/edge/attacker-paths.test.ts',
  'test/edge/console.test.ts',
  'test/edge/worker.test.ts',
  'test/edge/request-log.test.ts',
  'test/postgres/replicas.test.ts',
  'test/console/models-prices.test.ts',
  'test/edge/models.test.ts',
  'test/edge/money.test.ts',
];

/** `files` (paths relative to the repository) with the slow ones first, in SLOW_FIRST's order, then the rest by name. */
export function ordered(files: string[]): string[] {
  const rank = (f: string) => {
    const i = SLOW_FIRST.indexOf(f);
    return i === -1 ? SLOW_FIRST.length : i;
  };
  return [...new Set(files)].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const concurrency = Number(args.find((a) => a.startsWith('--concurrency='))?.slice('--concurrency='.length) ?? 6);
  const named = args.filter((a) => !a.startsWith('--'));
  const files = ordered(named.length ? named : globSync('test/**/*.test.ts', { cwd: ROOT }));
  // globalSetupPath: Node 24's run() takes it; @types/node does not list it yet
  const options: RunOptions & { globalSetupPath: string } = {
    files: files.map((f) => resolve(ROOT, f)),
    concurrency,
    timeout: 120_000,
    globalSetupPath: resolve(ROOT, 'test/helpers/global-setup.ts'),
    cwd: ROOT,
  };
  const events = run(options);
  // Two reporters on one stream of events: the spec reporter as it goes, the slowest files at the end.
  const forSpec = new PassThrough({ objectMode: true });
  const forSlowest = new PassThrough({ objectMode: true });
  let failed = false;
  events.on('data', (e: TestEvent) => {
    if (e.type === 'test:summary' && !e.data.file && !e.data.success) failed = true;
    forSpec.write(e);
    forSlowest.write(e);
  });
  events.on('end', () => {
    forSpec.end();
    forSlowest.end();
  });
  let slowest = '';
  const slowestDone = (async () => {
    for await (const s of slowestFiles(forSlowest)) slowest += s;
  })();
  const specOut = forSpec.compose(spec);
  specOut.pipe(process.stdout, { end: false });
  await new Promise((r) => specOut.on('end', r));
  await slowestDone;
  process.stdout.write(slowest);
  if (failed) process.exitCode = 1;
}
