// A rolling deploy: SIGTERM while clients keep sending on their keep-alive connections (a load
// balancer does, until it notices). The process drains — readiness false, Connection: close,
// in-flight calls finish, a stream still open at SHUTDOWN_TIMEOUT_MS is ended with its error
// event and charged by the estimate — then writes every usage record, charge and lease return,
// and exits 0. Exact books afterwards: ok usage records = 200 answers, Σ ledger charges =
// Σ usage credits per user, nothing leased. One process, and GATEWAY_WORKERS=2.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { assertExactBooks, chargedLoad } from '../helpers/load.ts';
import { sleep, until } from '../helpers/wait.ts';
import { startOpenAIStub } from '../stubs/openai.ts';
import { startNodeServer } from '../../src/runtimes/node/server.ts';
import { tempDir } from '../helpers/gateway.ts';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';

const SHUTDOWN_MS = 3000;
const PRICE = { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 };
const PRICES = { 'stub-model': PRICE, 'stub-stream-slow': PRICE, 'stub-slow': PRICE };

for (const workers of ['1', '2']) {
  test(`SIGTERM under continuing keep-alive load (GATEWAY_WORKERS=${workers}): exits 0 within SHUTDOWN_TIMEOUT_MS, books exact`, async (t) => {
    const stub = await startOpenAIStub({ streamSlowMs: 1000, streamSlowChunks: 30, slowMs: 1500 });
    const gw = await startGateway({
      env: {
        GATEWAY_WORKERS: workers,
        SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_MS),
        TEXTPROVIDER_API_KEY: 'sk-stub',
        TEXTPROVIDER_BASE_URL: stub.url,
        TEXTPROVIDER_MODELS: 'stub-model,stub-stream-slow,stub-slow',
        MODEL_PRICES: JSON.stringify(PRICES),
        BALANCE_INITIAL_CREDITS: '100000000',
        USAGE_FLUSH_MS: '1000', // records sit in the buffer: only the stop writes the last of them
      },
    });
    try {
      const admin = client(gw.url, gw.adminKey);
      await admin.post('/v1/cities/create', { name: 'D', city_id: 'drain' });
      const users = ['u0', 'u1', 'u2', 'u3', 'u4', 'u5', 'streamer', 'late'];
      const tokens: string[] = [];
      for (const u of users) tokens.push((await admin.post('/v1/cities/tokens/apply', { city_id: 'drain', user_id: u })).body.user_token);
      // a stream that outlives the drain deadline (30 chunks, one a second)
      const stream = fetch(`${gw.url}/v1/ai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens[6]}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'stub-stream-slow', stream: true, messages: [{ role: 'user', content: 'a long answer' }] }),
      }).then(async (r) => ({ status: r.status, text: await r.text() }));
      const load = chargedLoad([gw.url], tokens.slice(0, 6), 32, { model: 'stub-model', max_tokens: 5, messages: [{ role: 'user', content: 'load test words' }] });
      await until('load running', () => load.counts.ok.reduce((a, b) => a + b, 0) >= 300, 30_000);
      // a call surely in flight at SIGTERM (the load's may all sit between two requests when the
      // clients' process is starved of CPU): the upstream has it, and answers in 1.5 s
      const slowSeen = stub.requests.length;
      const late = fetch(`${gw.url}/v1/ai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens[7]}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'stub-slow', max_tokens: 5, messages: [{ role: 'user', content: 'one late call' }] }),
      }).then(async (r) => ({ status: r.status, connection: r.headers.get('connection'), text: await r.text() }));
      await until('the late call upstream', () => stub.requests.slice(slowSeen).some((r) => (r.body as { model?: string } | undefined)?.model === 'stub-slow'), 30_000);
      const t0 = Date.now();
      const code = await gw.stop('SIGTERM'); // the clients go on sending meanwhile
      const took = Date.now() - t0;
      const counts = await load.stop();
      assert.equal(code, 0, `exit code; stderr:\n${gw.stderr().slice(-2000)}`);
      assert.ok(took < SHUTDOWN_MS + 6000, `stopped in ${took} ms`);
      assert.ok(took >= SHUTDOWN_MS - 200, `the open stream held the drain to its deadline (${took} ms)`);
      assert.equal(counts.statuses.get(500) ?? 0, 0, 'no 500');
      // A connection busy at SIGTERM gets one last answer with Connection: close; an idle one is
      // closed at once; neither gets another answer from that worker (its listener no longer
      // accepts). With two workers the primary tells them one after the other: a client that
      // reconnects meanwhile can reach the one not yet draining and get its last answer there
      // too (33 of 32 connections, seen once with a second copy of the suite beside it).
      const l = await late;
      assert.deepEqual([l.status, l.connection], [200, 'close'], `the call in flight at SIGTERM: ${l.text}`);
      assert.ok(counts.closing <= 32 * Number(workers), `answers with Connection: close: ${counts.closing}; answers ${JSON.stringify([...counts.statuses])}, ${counts.failed} refused or reset, ${took} ms; stderr:\n${gw.stderr().slice(-1500)}`);
      const s = await stream;
      assert.equal(s.status, 200);
      assert.match(s.text, /gateway_stopping/, 'the open stream got its API’s error event');
      const books = await assertExactBooks(gw, 'drain', users, [...counts.ok, 0, 1]);
      assert.ok(books.records >= 300);
      const [rec] = await (await import('../helpers/sql.ts')).sqlAll<{ status: string; error_code: string; credits: number; estimated: number }>(gw, `SELECT status, error_code, credits, estimated FROM usage WHERE user_id = 'streamer'`);
      assert.deepEqual([rec.status, rec.error_code, Boolean(rec.estimated)], ['error', 'gateway_stopping', true], JSON.stringify(rec));
      assert.ok(rec.credits > 0, 'the cut stream is charged the estimate of what it relayed');
      t.diagnostic(`exit 0 after ${took} ms (SHUTDOWN_TIMEOUT_MS ${SHUTDOWN_MS}); answers ${JSON.stringify([...counts.statuses])}, ${counts.closing} with Connection: close, ${counts.failed} refused or reset; ${books.records} ok records, ${books.credits} credits = Σ charges`);
    } finally {
      await gw.stop('SIGKILL');
      await stub.close();
    }
  });
}

test('readiness is false from the moment a drain begins; /health/live stays true', async () => {
  const dir = tempDir();
  const s = await startNodeServer({ ...process.env, HOST: '127.0.0.1', PORT: '0', DATABASE_PATH: join(dir, 'c.sqlite'), DATABASE_URL: '', SHUTDOWN_TIMEOUT_MS: '1000' }, { logger: () => {} });
  const ask = async (path: string) => {
    const r = await s.gateway.fetch(new Request(`${s.url}${path}`));
    return { status: r.status, body: await r.json() };
  };
  assert.deepEqual(await ask('/health/ready'), { status: 200, body: { ok: true, ready: true } });
  const stopped = s.stop();
  const ready = await ask('/health/ready');
  assert.equal(ready.status, 503);
  assert.equal(ready.body.error.code, 'draining');
  assert.deepEqual(await ask('/health/live'), { status: 200, body: { ok: true } });
  await stopped;
  await sleep(0);
});

test('GATEWAY_WORKERS=2: a worker that never stops (frozen) is killed SHUTDOWN_TIMEOUT_MS + 20 s after SIGTERM, and the primary exits 1 saying so', async () => {
  const gw = await startGateway({ env: { GATEWAY_WORKERS: '2', SHUTDOWN_TIMEOUT_MS: '200' } });
  try {
    const workers = readFileSync(`/proc/${gw.child.pid}/task/${gw.child.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
    assert.equal(workers.length, 2, `the primary's children: ${workers}`);
    process.kill(workers[0], 'SIGSTOP'); // it cannot drain, nor exit
    const t0 = Date.now();
    const code = await gw.stop('SIGTERM');
    const took = Date.now() - t0;
    assert.equal(code, 1, `exit code; stderr:\n${gw.stderr().slice(-1500)}`);
    assert.ok(took >= 20_000 && took < 30_000, `the primary waited ${took} ms`);
    assert.match(gw.stderr(), new RegExp(`worker ${workers[0]} did not stop in time; killing it`));
    assert.doesNotMatch(gw.stderr(), new RegExp(`worker ${workers[1]} exited`), 'the other worker stopped by itself (exit 0)');
  } finally {
    await gw.stop('SIGKILL');
  }
});
