// GATEWAY_WORKERS=2: two worker processes share one port (node:cluster) on one SQLite file.
// The money race holds across them, a worker that dies is replaced, and SIGTERM stops the
// primary and every worker with no buffered usage record lost.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { moneyRace, RACE_ENV } from '../helpers/money-race.ts';
import { row } from '../money/setup.ts';
import { childPids } from '../helpers/proc.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub } from '../stubs/openai.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const cleanup: (() => Promise<unknown>)[] = [];
// Also when the test times out: a primary left running would keep this file from ending.
after(() => Promise.all(cleanup.map((f) => f())));

test('GATEWAY_WORKERS=2 on SQLite: the 50-way money race, a killed worker replaced, SIGTERM writes every usage record', async () => {
  const stub = await startOpenAIStub();
  cleanup.push(() => stub.close());
  const gw = await startGateway({
    postgres: false,
    env: {
      GATEWAY_WORKERS: '2',
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model',
      ...RACE_ENV,
    },
  });
  cleanup.unshift(() => gw.stop('SIGKILL'));
  try {
    const primary = gw.child.pid!;
    const workers = childPids(primary);
    assert.equal(workers.length, 2, 'two worker processes under the primary');
    assert.match(gw.stderr(), /listening on http:\/\/127\.0\.0\.1:\d+ \(2 workers/);

    // Both workers serve the one port: enough connections reach both (each worker logs its requests).
    await moneyRace({ urls: [gw.url], adminKey: gw.adminKey, stub, db: gw, city: 'race', user: 'racer' });

    // A worker that dies is replaced; the port keeps answering.
    process.kill(workers[0], 'SIGKILL');
    const replaced = await until('a new worker', () => {
      const now = childPids(primary);
      return now.length === 2 && !now.includes(workers[0]) ? now : null;
    }, 20_000);
    assert.equal((await client(gw.url).get('/health')).status, 200);

    // Buffered usage (flushed only every 60 s now) is written by each worker on SIGTERM.
    const admin = client(gw.url, gw.adminKey);
    await admin.post('/v1/env/upsert', { key: 'USAGE_FLUSH_MS', value: '60000' });
    await new Promise((r) => setTimeout(r, 3500)); // every worker's env snapshot has it (≤ 3 s)
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'race', user_id: 'late' })).body.user_token;
    await admin.post('/v1/balance/adjust', { city_id: 'race', user_id: 'late', credits: 100_000, reason: 'x', idempotency_key: 'late' });
    const rs = await Promise.all(
      Array.from({ length: 40 }, () => client(gw.url, token).post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'x' }] })),
    );
    assert.ok(rs.every((r) => r.status === 200));
    const before = await row<{ n: number }>(gw, `SELECT COUNT(*) AS n FROM usage WHERE user_id = 'late'`);
    assert.ok(before.n < 40, `records still buffered before the stop (${before.n} written)`);
    assert.equal(await gw.stop('SIGTERM'), 0, `the primary exits 0; its log ends:\n${gw.stderr().slice(-3000)}`);
    for (const pid of replaced!) assert.equal(alive(pid), false, `worker ${pid} stopped`);
    const after = await row<{ n: number; c: number }>(gw, `SELECT COUNT(*) AS n, SUM(credits) AS c FROM usage WHERE user_id = 'late'`);
    assert.deepEqual({ ...after }, { n: 40, c: 40_000 });
  } finally {
    await gw.stop();
    await stub.close();
  }
});

// A stop that comes while a replacement worker still loads its modules (seconds on a loaded
// machine): that worker ends by the signal before its handler is installed. It served nothing, so
// the stop is clean: exit 0, as an orchestrator's rolling restart expects.
test('SIGTERM while a replacement worker is still booting: every process stops and the primary exits 0', async () => {
  const gw = await startGateway({ postgres: false, env: { GATEWAY_WORKERS: '2' } });
  cleanup.unshift(() => gw.stop('SIGKILL'));
  const primary = gw.child.pid!;
  const workers = childPids(primary);
  assert.equal(workers.length, 2);
  process.kill(workers[0], 'SIGKILL');
  // SIGTERM as soon as the replacement exists: it is still loading its modules
  const replacement = await until('a replacement worker', () => childPids(primary).find((p) => !workers.includes(p)) ?? null, 20_000);
  assert.equal(await gw.stop('SIGTERM'), 0, `the primary exits 0; its log ends:\n${gw.stderr().slice(-2000)}`);
  assert.equal(alive(replacement!), false, 'the replacement stopped too');
  assert.doesNotMatch(gw.stderr(), /while stopping/);
});
