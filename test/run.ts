// npm test: the test files through node:test's run(), each file in a run() of its own, N at once,
// the slowest known ones first (SLOW_FIRST) and the rest by name. Each file's output is printed
// whole as it ends, under its name; then the 20 slowest files and the totals.
//   - `node --test` sorts its files by name, so a long file whose name sorts late started late and
//     ran alone at the end.
//   - One run() of all the files starts them in the given order but reports them in that order
//     too: the longest file, started first, held back every other file's output until its end.
// With a PostgreSQL server, the service suites' files (test/helpers/postgres-suites.ts) also run a
// second time on PostgreSQL, file by file among the others, named "… (PostgreSQL)";
// test/postgres/suites.test.ts, which runs them all at once, is for running them alone.
//
//   node test/run.ts [--concurrency=N] [file ...]   (default: test/**/*.test.ts; 8 at once with
//                                                    PostgreSQL, else 6)
//
// The global setup (a migrated PostgreSQL template, test/helpers/global-setup.ts) runs once;
// a run started by another (test/postgres/suites.test.ts) inherits its template.
import { globSync } from 'node:fs';
import { resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { run, type RunOptions } from 'node:test';
import { spec } from 'node:test/reporters';
import type { TestEvent } from 'node:test/reporters';
import slowestFiles from './reporters/slowest-files.ts';
import { globalSetup, globalTeardown } from './helpers/global-setup.ts';
import { pgSkipReason } from './helpers/postgres.ts';
import { POSTGRES_SUITES, POSTGRES_SUITES_CONCURRENCY, POSTGRES_SUITES_ENV } from './helpers/postgres-suites.ts';

const ROOT = resolve(import.meta.dirname, '..');
const POSTGRES_SUITES_FILE = 'test/postgres/suites.test.ts';

/**
 * The longest files of a run on 2 cores, longest first (npm test's own list of file times, 2026-11-29,
 * AMD EPYC, with PostgreSQL): they start first, so none is left running alone at the end. A file
 * of the service suites' run on PostgreSQL is named with " (PostgreSQL)".
 */
export const SLOW_FIRST = [
  'test/postgres/suites.test.ts', // without a PostgreSQL server: npm test runs it (it skips), and alone it is the longest
  'test/edge/deploy.test.ts',
  'test/client/readme.test.ts',
  'test/usage/export.test.ts',
  'test/edge/security.test.ts',
  'test/usage/partitions.test.ts',
  'test/kernel/drain.test.ts',
  'test/console/console.test.ts',
  'test/edge/worker.test.ts',
  'test/userpage/userpage.test.ts',
  'test/kernel/drain.test.ts (PostgreSQL)',
  'test/console/limits-upstreams.test.ts',
  'test/edge/request-log.test.ts',
  'test/edge/models.test.ts',
  'test/postgres/restart.test.ts',
  'test/postgres/replicas.test.ts',
  'test/kernel/rate-limit-workers.test.ts',
  'test/edge/money.test.ts',
  'test/accounts/keys.test.ts',
  'test/usage/partitions.test.ts (PostgreSQL)',
  'test/accounts/keys.test.ts (PostgreSQL)',
  'test/edge/events-out.test.ts',
  'test/edge/d1-unavailable.test.ts',
  'test/ai/media.test.ts (PostgreSQL)',
  'test/edge/plans.test.ts',
  'test/ai/money.test.ts (PostgreSQL)',
  'test/edge/stream-idle.test.ts',
  'test/edge/attacker-paths.test.ts',
  'test/kernel/persistence.test.ts',
];

/**
 * The jobs with the slow ones first, in SLOW_FIRST's order (a PostgreSQL run's file is named there
 * with " (PostgreSQL)"), then the other files on PostgreSQL, slower than most, then the rest by name.
 */
export function orderedJobs(jobs: Job[]): Job[] {
  const rank = (j: Job) => {
    const i = SLOW_FIRST.indexOf(labelOf(j));
    return i !== -1 ? i : SLOW_FIRST.length + (j.postgres ? 0 : 1);
  };
  const seen = new Set<string>();
  const unique = jobs.filter((j) => !seen.has(labelOf(j)) && seen.add(labelOf(j)));
  return unique.sort((a, b) => rank(a) - rank(b) || (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
}

/**
 * A file in which no test runs for this long is stopped, its process killed, and counted as
 * failed. A test that timed out can leave a server or a socket that keeps its file's process
 * alive after its last test, and then the whole run waited until CI's own limit, without a name
 * to show for it (2026-11-29, a replicas test beside a second copy of the suite). Only the time
 * with no test running counts: a running test ends by its own timeout (120 s, some more: the
 * export and deploy tests 400 s, the PostgreSQL suites 900 s), and a file's module code and
 * hooks between tests take seconds. The time a file's process takes to end after its last test
 * counts too (its 'exit' hooks): heavy cleanup belongs in the test, under its own timeout.
 * TEST_IDLE_LIMIT_S overrides it.
 */
const IDLE_LIMIT_MS = Number(process.env.TEST_IDLE_LIMIT_S ?? 120) * 1000;

/** A file to run, on SQLite or (the service suites' second run) on PostgreSQL. */
interface Job {
  file: string;
  postgres: boolean;
}
const labelOf = (j: Job) => (j.postgres ? `${j.file} (PostgreSQL)` : j.file);
type Counts = { tests: number; passed: number; failed: number; skipped: number; cancelled: number; todo: number };

/**
 * One file in a run() of its own, so its spec output is whole when the file ends: one run() of
 * many files reports them in the order it was given them, so the longest file, started first,
 * held back every other file's output until its end (six minutes of silence, then all of it).
 */
async function runOne(job: Job, each: (e: TestEvent) => void): Promise<{ output: string; counts: Counts; ok: boolean }> {
  const watchdog = new AbortController();
  const file = resolve(ROOT, job.file);
  // tests running in the file (test:dequeue and test:complete come as they happen); while none
  // is, the idle timer runs
  let running = 0;
  let idle: NodeJS.Timeout | null = null;
  const idleFrom = () => {
    if (idle) idle.refresh();
    else idle = setTimeout(() => watchdog.abort(new Error(`no test running for ${IDLE_LIMIT_MS / 1000} s`)), IDLE_LIMIT_MS);
  };
  idleFrom();
  const options: RunOptions = {
    files: [file],
    timeout: 120_000,
    signal: watchdog.signal,
    cwd: ROOT,
    ...(job.postgres ? { env: { ...process.env, ...POSTGRES_SUITES_ENV } } : {}),
  };
  const forSpec = new PassThrough({ objectMode: true });
  let counts: Counts = { tests: 0, passed: 0, failed: 0, skipped: 0, cancelled: 0, todo: 0 };
  let ok = false;
  let reportedAt: number | null = null;
  const events = run(options);
  events.on('data', (e: TestEvent) => {
    if ((e.type === 'test:dequeue' || e.type === 'test:complete') && e.data.name !== file) {
      running += e.type === 'test:dequeue' ? 1 : -1;
      if (running > 0 && idle) (clearTimeout(idle), (idle = null));
      else if (running === 0) idleFrom();
    }
    each(e);
    // the file's own summary: its process has no handle left and is running its exit hooks
    if (e.type === 'test:summary' && e.data.file) reportedAt = performance.now();
    if (e.type === 'test:summary' && !e.data.file) {
      counts = e.data.counts as unknown as Counts; // failed: Node sends it; @types/node omits it
      ok = e.data.success;
    }
    // the run's own totals (diagnostics without a file): once for all files, at the end
    if (e.type === 'test:diagnostic' && !e.data.file) return;
    forSpec.write(e);
  });
  events.once('end', () => forSpec.end());
  let output = '';
  await new Promise((r) => forSpec.compose(spec).setEncoding('utf8').on('data', (d: string) => (output += d)).once('end', r));
  if (idle) clearTimeout(idle);
  if (watchdog.signal.aborted) {
    output +=
      reportedAt === null
        ? `✖ stopped: no test ran for ${IDLE_LIMIT_MS / 1000} s, and the file's process was still alive (a handle left open: a server, a socket, a timer)\n`
        : `✖ stopped: the file's tests had ended and it had reported, but its process had not ended ${((performance.now() - reportedAt) / 1000).toFixed(0)} s later (a slow 'exit' hook, or a child process holding its output)\n`;
    ok = false;
  } else if (reportedAt !== null && performance.now() - reportedAt > 30_000) {
    // it passed, but a quarter of the way to the watchdog: say so before it fails somewhere
    // slower (dropping a file's PostgreSQL databases takes up to 20 s under load, and is bounded)
    output += `⚠ the file's process took ${((performance.now() - reportedAt) / 1000).toFixed(0)} s to end after its tests (its 'exit' hooks)\n`;
  }
  return { output, counts, ok };
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const named = args.filter((a) => !a.startsWith('--'));
  // The service suites on PostgreSQL (when a server is there) run file by file among the others,
  // instead of as test/postgres/suites.test.ts (one file that runs them all in a run of its own).
  const onPostgres = named.length === 0 && !process.env.CITYGATE_TEST_DIALECT && !(await pgSkipReason());
  const slots = Number(args.find((a) => a.startsWith('--concurrency='))?.slice('--concurrency='.length) ?? (onPostgres ? 8 : 6));
  const mainFiles = (named.length ? named : globSync('test/**/*.test.ts', { cwd: ROOT })).filter((f) => !onPostgres || f !== POSTGRES_SUITES_FILE);
  const jobs = orderedJobs([...mainFiles.map((file) => ({ file, postgres: false })), ...(onPostgres ? POSTGRES_SUITES.map((file) => ({ file, postgres: true })) : [])]);
  await globalSetup(); // before any file starts: every one inherits its template
  const forSlowest = new PassThrough({ objectMode: true });
  let slowest = '';
  const slowestDone = (async () => {
    for await (const s of slowestFiles(forSlowest)) slowest += s;
  })();
  const started = performance.now();
  const total: Counts = { tests: 0, passed: 0, failed: 0, skipped: 0, cancelled: 0, todo: 0 };
  const onPg = { tests: 0 };
  const failedFiles: string[] = [];
  // Files of the PostgreSQL run go first whenever fewer than POSTGRES_SUITES_CONCURRENCY of them
  // run: more at once exhaust the server's connections (a second copy of the suite beside this
  // one saw "too many clients"), so theirs is the scarce lane, kept full from the start.
  const pending = [...jobs];
  let pgRunning = 0;
  const waiting: (() => void)[] = [];
  /** The next file this lane may start; null: only PostgreSQL files are left, and they are at their cap. */
  const take = (): Job | null | undefined => {
    const pg = pgRunning < POSTGRES_SUITES_CONCURRENCY ? pending.findIndex((j) => j.postgres) : -1;
    const i = pg !== -1 ? pg : pending.findIndex((j) => !j.postgres);
    if (i === -1) return pending.length ? null : undefined;
    return pending.splice(i, 1)[0];
  };
  const lane = async () => {
    for (let job = take(); job !== undefined; job = take()) {
      if (job === null) {
        await new Promise<void>((r) => waiting.push(r));
        continue;
      }
      if (job.postgres) pgRunning++;
      const t0 = performance.now();
      const label = labelOf(job);
      const r = await runOne(job, (e) => {
        // each file's wall time, for the slowest files (the PostgreSQL run's named so)
        if (e.type === 'test:summary' && e.data.file) forSlowest.write({ ...e, data: { ...e.data, file: label } });
      });
      if (job.postgres) {
        pgRunning--;
        for (const wake of waiting.splice(0)) wake();
      }
      for (const k of Object.keys(total) as (keyof Counts)[]) total[k] += r.counts[k] ?? 0;
      if (job.postgres) onPg.tests += r.counts.tests;
      if (!r.ok) failedFiles.push(label);
      process.stdout.write(`\n── ${label} (${((performance.now() - t0) / 1000).toFixed(1)} s)\n${r.output}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(slots, jobs.length) }, lane));
  forSlowest.end();
  await slowestDone;
  await globalTeardown();
  process.stdout.write(slowest);
  // the totals, as one run() of all the files would give them
  process.stdout.write(`\nℹ tests ${total.tests}${onPostgres ? ` (${total.tests - onPg.tests} on SQLite, ${onPg.tests} on PostgreSQL)` : ''}\n`);
  for (const k of ['passed', 'failed', 'cancelled', 'skipped', 'todo'] as const) process.stdout.write(`ℹ ${k === 'passed' ? 'pass' : k === 'failed' ? 'fail' : k} ${total[k]}\n`);
  process.stdout.write(`ℹ files ${jobs.length}, ${slots} at once\nℹ duration_ms ${(performance.now() - started).toFixed(0)}\n`);
  if (failedFiles.length) process.stdout.write(`\n✖ failing files (their tests' failures are under their names above):\n${failedFiles.map((f) => `  ${f}\n`).join('')}`);
  if (failedFiles.length || total.failed > 0) process.exitCode = 1;
}
