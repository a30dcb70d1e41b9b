// The Node job runner: a failing job is retried with exponential backoff and given up after
// its attempt cap; a RetryJob is rescheduled after the delay it asks for, up to maxAttempts;
// and a job whose process was killed mid-run (SIGKILL: no graceful stop) is taken over by the
// next boot once its lease expires. Real SQLite files, real gateway processes.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { openNodeSqlite } from '../../src/db/dialects/node-sqlite.ts';
import { createGateway } from '../../src/kernel/gateway.ts';
import { RetryJob } from '../../src/kernel/jobs.ts';
import type { Logger } from '../../src/kernel/log.ts';
import { defineService } from '../../src/kernel/service.ts';
import { NodeJobRunner } from '../../src/runtimes/node/job-runner.ts';
import { stockServices } from '../../src/services/index.ts';
import { RICH_USERS, startAiWorld } from '../ai/setup.ts';
import { tempDir } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';

/** A gateway with a `probe` service whose jobs record each attempt's time, on a SQLite file. */
async function world(opts: { maxAttempts?: number } = {}) {
  const path = join(tempDir('citygate-jobs-'), 'citygate.sqlite');
  const db = openNodeSqlite(path);
  const attempts: Record<string, number[]> = {};
  const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
  const logger: Logger = (_level, msg, fields) => logs.push({ msg, fields });
  const probe = defineService({
    id: 'probe',
    name: 'Probe',
    actions: {},
    jobs: {
      async fail(msg) {
        (attempts[msg.id] ??= []).push(Date.now());
        throw new Error('upstream exploded');
      },
      async retry(msg) {
        (attempts[msg.id] ??= []).push(Date.now());
        throw new RetryJob('not ready yet', 100);
      },
    },
  });
  const jobs = new NodeJobRunner(db, logger, { pollMs: 50, ...opts });
  const gw = createGateway({ db, services: [...stockServices, probe], logger, processEnv: {}, jobs });
  await gw.init();
  jobs.start(gw);
  const side = new DatabaseSync(path);
  const queued = (id: string) => side.prepare('SELECT attempts FROM job_queue WHERE job_id = ?').get(id) as { attempts: number } | undefined;
  return {
    jobs, attempts, logs, queued,
    async close() {
      await jobs.stop();
      await gw.stop();
      side.close();
    },
  };
}

test('a failing job: 3 attempts, 2 s then 4 s apart (exponential backoff), then given up and logged each time', async () => {
  const w = await world();
  try {
    await w.jobs.enqueue({ service: 'probe', type: 'fail', id: 'f1' });
    await until('the job to be given up', () => w.attempts.f1?.length === 3 && !w.queued('f1'));
    const [a, b, c] = w.attempts.f1;
    assert.ok(b - a >= 2000 - 50, `first retry after ${b - a} ms (backoff 2 s)`);
    assert.ok(c - b >= 4000 - 50, `second retry after ${c - b} ms (backoff 4 s)`);
    assert.equal(w.logs.filter((l) => l.msg === 'job failed' && l.fields?.id === 'f1').length, 3);
    // Given up for good: no fourth attempt.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(w.attempts.f1.length, 3);
  } finally {
    await w.close();
  }
});

test('RetryJob: rescheduled after the delay it asks for, at most maxAttempts times', async () => {
  const w = await world({ maxAttempts: 5 });
  try {
    await w.jobs.enqueue({ service: 'probe', type: 'retry', id: 'r1' });
    await until('the retries to stop at the cap', () => w.attempts.r1?.length === 5 && !w.queued('r1'));
    const gaps = w.attempts.r1.slice(1).map((t, i) => t - w.attempts.r1[i]);
    for (const g of gaps) assert.ok(g >= 100 - 10, `a retry came ${g} ms after the last (asked: 100 ms)`);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(w.attempts.r1.length, 5, 'no attempt past the cap');
    assert.equal(w.logs.filter((l) => l.msg === 'job failed').length, 0, 'a RetryJob is no failure');
  } finally {
    await w.close();
  }
});

test('SIGKILL mid-job: the next boot takes the job over once its lease expires, and finishes it', async () => {
  const w = await startAiWorld({ env: { ...RICH_USERS, OPENAI_API_KEY: 'sk-stub', JOB_LEASE_SECONDS: '4', AI_UPSTREAM_TIMEOUT_MS: '60000' }, stub: { slowMs: 3000 } });
  try {
    const alice = () => client(w.gw.url, w.alice);
    const c = await alice().post('/v1/ai/image/create', { model: 'slow-image', prompt: 'a slow snail' });
    assert.equal(c.status, 200, c.text);
    const upstream = () => w.stub.requests.filter((r) => r.path === '/v1/images/generations').length;
    await until('the runner to call the upstream', () => upstream() === 1);
    const lease = new DatabaseSync(w.gw.dbPath, { readOnly: true });
    const row = lease.prepare('SELECT locked_until, attempts FROM job_queue').get() as { locked_until: number; attempts: number };
    lease.close();
    assert.equal(row.attempts, 1);
    assert.ok(row.locked_until > Date.now(), 'the running job is leased');
    // A crash: no graceful stop, so the lease is not handed back.
    assert.equal(await w.gw.stop('SIGKILL'), null);
    w.gw = await w.gw.restart();
    const again = await until('the new process to call the upstream again', () => (upstream() === 2 ? Date.now() : 0));
    assert.ok(again >= row.locked_until, `taken over ${row.locked_until - again} ms before the lease expired`);
    const done = await until('the job to finish after the restart', async () => {
      const r = await client(w.gw.url, w.alice).post('/v1/ai/image/result', { job_id: c.body.job_id });
      return r.body.status === 'succeeded' || r.body.status === 'failed' ? r.body : null;
    });
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    assert.equal(upstream(), 2, 'run again once by the new process');
    assert.equal((await fetch(done.images[0].url)).status, 200);
  } finally {
    await w.close();
  }
});
