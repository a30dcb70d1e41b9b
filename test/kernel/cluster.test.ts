// Several worker processes (node:cluster) on one database: /metrics — each worker counts its
// own requests, and whichever worker answers GET /metrics answers the sum over all workers
// (prom-client's AggregatorRegistry in the primary); and an upstream created or removed
// through one worker is used (or no longer used) by every worker within 3 s.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { readAdminKey, tempDir } from '../helpers/gateway.ts';
import { call } from '../helpers/http.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');
let stub: OpenAIStub;
let child: ReturnType<typeof spawn>;
let url = '';
let adminKey = '';
let err = '';

before(async () => {
  stub = await startOpenAIStub();
  const dir = tempDir('citygate-cluster-');
  const dbPath = join(dir, 'citygate.sqlite');
  child = spawn(process.execPath, [MAIN, 'serve'], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, HOST: '127.0.0.1', PORT: '0', DATABASE_PATH: dbPath, GATEWAY_WORKERS: '2', TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  child.stdout!.resume();
  await new Promise<void>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`cluster did not start:\n${err}`)), 30_000);
    const check = () => {
      // The primary prints one line once every worker listens.
      const m = /citygate listening on (http:\/\/\S+) \(2 workers/.exec(err);
      if (m) {
        clearTimeout(timer);
        url = m[1];
        res();
      }
    };
    child.stderr!.on('data', check);
  });
  adminKey = await readAdminKey(dbPath);
});
after(async () => {
  if (child && child.exitCode === null) await new Promise((r) => (child.once('exit', r), child.kill('SIGTERM')));
  await stub?.close();
});

test('two workers: every scrape (from either worker) counts the requests both workers served', async () => {
  const N = 40;
  const results = await Promise.all(
    Array.from({ length: N }, () => call(url, 'POST', '/v1/ai/chat/completions', { token: adminKey, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } })),
  );
  assert.deepEqual(results.map((r) => r.status), Array(N).fill(200));
  for (let i = 0; i < 4; i++) {
    const r = await call(url, 'GET', '/metrics', { token: adminKey });
    assert.equal(r.status, 200, r.text);
    const fam = parsePrometheusTextFormat(r.text).find((f) => f.name === 'citygate_http_requests_total')!;
    const chat = fam.metrics.filter((m) => m.labels?.route === '/v1/ai/chat/completions' && m.labels?.status === '200').reduce((a, m) => a + Number(m.value), 0);
    assert.equal(chat, N, `scrape ${i}: ${chat} of ${N} chat requests counted`);
    const attempts = parsePrometheusTextFormat(r.text).find((f) => f.name === 'citygate_upstream_attempts_total')!;
    assert.equal(attempts.metrics.filter((m) => m.labels?.outcome === 'ok').reduce((a, m) => a + Number(m.value), 0), N);
  }
});

test('an upstream created through one worker serves on every worker within 3 s; once removed, no worker calls it after 3 s', async () => {
  const created = await call(url, 'POST', '/v1/ai/upstreams/create', { token: adminKey, body: { name: 'shared', kind: 'openai-compatible', base_url: stub.url, api_key: 'sk-stub', models: [{ id: 'cluster-model', upstream_model: 'stub-model' }] } });
  assert.equal(created.status, 200, created.text);
  const t0 = Date.now();
  const chat = () => call(url, 'POST', '/v1/ai/chat/completions', { token: adminKey, body: { model: 'cluster-model', messages: [{ role: 'user', content: 'hi' }] } });
  let lastMiss = 0;
  for (let ok = 0; ok < 20; ) {
    const r = await chat();
    if (r.status === 200) ok++;
    else {
      assert.equal(r.status, 404, r.text);
      lastMiss = Date.now() - t0;
      ok = 0;
    }
    assert.ok(Date.now() - t0 < 6000, 'every worker serves the new upstream');
  }
  assert.ok(lastMiss < 3000, `a worker still did not know the upstream ${lastMiss} ms after it was created`);
  const removed = await call(url, 'POST', '/v1/ai/upstreams/remove', { token: adminKey, body: { upstream_id: created.body.upstream_id } });
  assert.equal(removed.status, 200);
  const t1 = Date.now();
  await new Promise((r) => setTimeout(r, 3000 - (Date.now() - t1)));
  const before = stub.requestCount;
  const after = await Promise.all(Array.from({ length: 10 }, chat));
  assert.deepEqual(after.map((r) => r.status), Array(10).fill(404));
  assert.equal(stub.requestCount, before, 'no worker called the removed upstream');
});
