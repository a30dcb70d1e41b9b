// Request logs on the edge (Workers, D1, R2): with REQUEST_LOG=full a streamed call's log is
// written after the response (the request's waitUntil): its row to D1, its bodies to R2, the
// stream kept as its assembled answer and no key or token in either; usage/request-log reads it
// back; the scheduled handler's retention pass deletes an expired log's row and its R2 object.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

const UPSTREAM_KEY = 'edge-upstream-key-0a1b2c3d4e5f';
const PASTED = 'sk-proj-EdgePasted0123456789abcdef';
let stub: OpenAIStub;
let w: TestWorker;

before(async () => {
  stub = await startOpenAIStub({ apiKey: UPSTREAM_KEY });
  w = await startWorker({
    storage: true,
    vars: { TEXTPROVIDER_API_KEY: UPSTREAM_KEY, TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', REQUEST_LOG: 'full' },
  });
});
after(async () => {
  await w?.stop();
  await stub?.close();
});

test('D1 + R2: a full log of a stream is written, read back, redacted, and pruned with its object', async () => {
  assert.equal((await fetch(`${w.url}/health`)).status, 200);
  const adminKey = await w.adminKey();
  const admin = client(w.url, adminKey);
  assert.equal((await admin.post('/v1/cities/create', { name: 'edge', city_id: 'edge' })).status, 200);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'edge', user_id: 'e' })).body.user_token;
  const r = await call(w.url, 'POST', '/v1/ai/chat/completions', {
    token,
    body: { model: 'stub-model', stream: true, messages: [{ role: 'user', content: `edge key ${PASTED} here` }] },
  });
  assert.equal(r.status, 200, r.text);
  const requestId = r.headers.get('x-request-id')!;
  const [row] = await until('the log row in D1', async () => (await w.sql<Record<string, any>>(`SELECT * FROM request_logs WHERE request_id = ?`, requestId)).length ? w.sql<Record<string, any>>(`SELECT * FROM request_logs WHERE request_id = ?`, requestId) : null, 10_000);
  assert.equal(row.mode, 'full');
  assert.match(row.blob_key, /^request-logs\/\d{4}-\d{2}-\d{2}\//);
  const bucket = await w.mf.getR2Bucket('MEDIA');
  const obj = await bucket.get(row.blob_key);
  assert.ok(obj, 'the bodies are an R2 object');
  const stored = (await obj.text()) + JSON.stringify(row);
  for (const s of [UPSTREAM_KEY, PASTED, token, adminKey]) assert.ok(!stored.includes(s), `${s.slice(0, 12)}… stored`);

  const log = await admin.get(`/v1/usage/request-log?request_id=${requestId}`);
  assert.equal(log.status, 200, log.text);
  assert.equal(log.body.bodies, 'stored');
  assert.equal(log.body.request.headers.authorization, '[redacted]');
  assert.equal(log.body.response.body.choices[0].message.content, 'Hello from stub: edge key [redacted] here');

  // ten days old: the scheduled handler's retention pass deletes the row and its object
  await w.sql(`UPDATE request_logs SET created_at = ? WHERE request_id = ?`, Date.now() - 10 * 86_400_000, requestId);
  // and bodies whose row never came (a kill between the two writes): 1,001 of a day past
  // retention (two R2 list pages) go; one of a day still kept stays
  const dayOf = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
  const orphans = Array.from({ length: 1001 }, (_, i) => `request-logs/${dayOf(9)}/orphan-${i}.json`);
  for (let i = 0; i < orphans.length; i += 100) await Promise.all(orphans.slice(i, i + 100).map((k) => bucket.put(k, '{}')));
  const recent = `request-logs/${dayOf(2)}/orphan-recent.json`;
  await bucket.put(recent, '{}');
  const worker = await w.mf.getWorker();
  await worker.scheduled({ cron: '17 * * * *' });
  await until('the log pruned', async () => (await w.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM request_logs`))[0].n === 0, 10_000);
  assert.equal(await bucket.get(row.blob_key), null, 'its R2 object is gone');
  assert.equal((await admin.get(`/v1/usage/request-log?request_id=${requestId}`)).status, 404);
  await until('the orphans of the old day deleted', async () => (await bucket.list({ prefix: `request-logs/${dayOf(9)}/` })).objects.length === 0, 10_000);
  assert.ok(await bucket.get(recent), 'a day still within retention keeps its objects');
});

test('a Worker without R2 storage keeps request logs as metadata only, and says so once', async () => {
  const bare = await startWorker({ vars: { TEXTPROVIDER_API_KEY: UPSTREAM_KEY, TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', REQUEST_LOG: 'full' } });
  try {
    assert.equal((await fetch(`${bare.url}/health`)).status, 200);
    const admin = client(bare.url, await bare.adminKey());
    assert.equal((await admin.post('/v1/cities/create', { name: 'edge', city_id: 'edge' })).status, 200);
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'edge', user_id: 'e' })).body.user_token;
    const r = await call(bare.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
    assert.equal(r.status, 200, r.text);
    const requestId = r.headers.get('x-request-id')!;
    await until('the log row', async () => (await bare.sql(`SELECT 1 FROM request_logs WHERE request_id = ?`, requestId)).length > 0, 10_000);
    const log = await admin.get(`/v1/usage/request-log?request_id=${requestId}`);
    assert.equal(log.status, 200, log.text);
    assert.equal(log.body.mode, 'metadata');
    assert.equal(log.body.bodies, 'none');
    assert.equal(log.body.request.headers.authorization, '[redacted]');
    assert.match(bare.logs(), /REQUEST_LOG=full without blob storage/);
  } finally {
    await bare.stop();
  }
});
