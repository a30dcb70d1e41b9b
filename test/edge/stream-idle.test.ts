// AI_STREAM_IDLE_TIMEOUT_MS on Workers (workerd, D1): a stream whose upstream goes silent after
// its first event ends with the API's error event and one record; a client that reads slowly
// (pausing past the deadline while the upstream has sent everything) gets the whole answer.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { client, readWithPause } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

const IDLE_MS = 800;
let stub: OpenAIStub;
let w: TestWorker;
let token = '';

before(async () => {
  stub = await startOpenAIStub();
  w = await startWorker({
    vars: { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', AI_STREAM_IDLE_TIMEOUT_MS: String(IDLE_MS) },
  });
  assert.equal((await fetch(`${w.url}/health`)).status, 200); // the first request migrates D1
  const admin = client(w.url, await w.adminKey());
  assert.equal((await admin.post('/v1/cities/create', { name: 'edge', city_id: 'edge' })).status, 200);
  token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'edge', user_id: 'e' })).body.user_token;
});
after(async () => {
  await w?.stop();
  await stub?.close();
});

const stream = (content: string) =>
  fetch(`${w.url}/v1/ai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'stub-model', stream: true, messages: [{ role: 'user', content }] }),
    signal: AbortSignal.timeout(30_000),
  });

test('Workers: a stream that stalls after its first event ends after the idle deadline with its error event and one record', async () => {
  stub.setFault({ stallStream: true });
  try {
    const started = Date.now();
    const res = await stream('one two three');
    assert.equal(res.status, 200);
    const text = await res.text();
    const took = Date.now() - started;
    assert.ok(took >= IDLE_MS - 50 && took < IDLE_MS + 8000, `ended after ${took} ms`);
    assert.match(text, /upstream_stream_idle/, text.slice(-300));
    await until('its record', async () => (await w.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM usage WHERE error_code = 'upstream_stream_idle'`))[0].n === 1, 10_000);
  } finally {
    stub.setFault(null);
  }
});

test('Workers: a slow client is not an idle upstream: a reader that pauses past the deadline gets the whole answer', async () => {
  const words = Array.from({ length: 40_000 }, (_, i) => `w${i}`).join(' '); // echoed: ~5 MB of events
  const res = await stream(words);
  assert.equal(res.status, 200);
  const text = await readWithPause(res, 3 * IDLE_MS); // the buffers fill, and citygate stops reading the upstream
  assert.doesNotMatch(text, /upstream_stream_idle/, 'no idle error');
  assert.match(text, /"content":" w39999"/, 'the last word arrived');
  assert.match(text, /data: \[DONE\]\s*$/);
  await until('an ok record', async () => (await w.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM usage WHERE status = 'ok' AND input_tokens > 40000`))[0].n === 1, 10_000);
});
