// Usage at scale on the edge (Workers, D1): calls write records and both rollups after each
// request; the Worker's scheduled handler (the cron trigger the deploy declares) runs the
// retention pass: records older than USAGE_RETENTION_DAYS go, in batched deletes; the rollup
// keeps their totals until USAGE_ROLLUP_RETENTION_DAYS, whose older rows go in batches too;
// usage/export streams from D1.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

let stub: OpenAIStub;
let w: TestWorker;
const DAY = 86_400_000;

before(async () => {
  stub = await startOpenAIStub();
  w = await startWorker({
    vars: { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', USAGE_RETENTION_DAYS: '30', USAGE_ROLLUP_RETENTION_DAYS: '35', USAGE_PRUNE_BATCH: '3' },
  });
});
after(async () => {
  await w?.stop();
  await stub?.close();
});

test('D1: the scheduled handler prunes records past retention, and rollup rows past theirs, in batches; rollups and export read what is kept', async () => {
  assert.equal((await fetch(`${w.url}/health`)).status, 200); // the first request migrates D1
  const admin = client(w.url, await w.adminKey());
  assert.equal((await admin.post('/v1/cities/create', { name: 'edge', city_id: 'edge' })).status, 200);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'edge', user_id: 'e' })).body.user_token;
  for (let i = 0; i < 3; i++) {
    const r = await call(w.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: `edge ${i}` }] } });
    assert.equal(r.status, 200, r.text);
  }
  await until('records written', async () => (await w.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM usage WHERE city_id = 'edge'`))[0].n === 3, 10_000);
  const rolled = await w.sql<{ c: number }>(`SELECT SUM(calls) AS c FROM usage_hourly WHERE city_id = 'edge'`);
  assert.equal(rolled[0].c, 3, 'the hourly rollup, kept by the same batches');
  // ten records of 40 days ago (as an older deployment would have left)
  const old = Date.now() - 40 * DAY;
  for (let i = 0; i < 10; i++) {
    await w.sql(
      `INSERT INTO usage (usage_id, request_id, city_id, user_id, identity, model, mode, status, input_tokens, output_tokens, cached_tokens, images, seconds, credits, duration_ms, created_at)
       VALUES (?, ?, 'edge', 'e', 'user', 'stub-model', 'compat', 'ok', 1, 1, 0, 0, 0, 0, 1, ?)`,
      `use_old_${i}`, `req_old_${i}`, old + i,
    );
  }
  // and rollup rows of 40 days ago: seven hours and a day, past USAGE_ROLLUP_RETENTION_DAYS (35)
  const oldHour = Math.floor(old / 3_600_000) * 3_600_000;
  for (let h = 0; h < 7; h++) {
    await w.sql(`INSERT INTO usage_hourly (hour, city_id, model, mode, status, upstream, calls) VALUES (?, 'edge', 'stub-model', 'compat', 'ok', 'u', 1)`, oldHour + h * 3_600_000);
  }
  await w.sql(`INSERT INTO usage_daily (day, city_id, model, calls) VALUES (?, 'edge', 'stub-model', 7)`, new Date(old).toISOString().slice(0, 10));
  const worker = await w.mf.getWorker();
  await worker.scheduled({ cron: '17 * * * *' });
  await until('old records pruned', async () => (await w.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM usage WHERE city_id = 'edge'`))[0].n === 3, 10_000);
  await until('old rollup rows pruned', async () => (await w.sql<{ c: number }>(`SELECT SUM(calls) AS c FROM usage_hourly WHERE city_id = 'edge'`))[0].c === 3, 10_000);
  assert.equal((await w.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM usage_daily WHERE city_id = 'edge' AND day < ?`, new Date(Date.now() - 35 * DAY).toISOString().slice(0, 10)))[0].n, 0);
  assert.equal((await w.sql<{ c: number }>(`SELECT SUM(calls) AS c FROM usage_daily WHERE city_id = 'edge'`))[0].c, 3, "today's daily row is kept");
  const res = await fetch(`${w.url}/v1/usage/export?city_id=edge&format=csv`, { headers: { authorization: `Bearer ${await w.adminKey()}` } });
  assert.equal(res.status, 200);
  assert.equal((await res.text()).trim().split('\r\n').length, 1 + 3);
  const stats = await admin.get('/v1/usage/stats?group=city&city_id=edge');
  assert.equal(stats.status, 200, stats.text);
  assert.equal(stats.body.totals.calls, 3);
});
