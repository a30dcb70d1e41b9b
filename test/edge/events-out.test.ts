// Issue 28 on the edge: the stock Worker in workerd on a local D1 and a local queue. Webhooks
// are written in the changes' D1 batches and delivered by the queue consumer (retries re-sent
// with their delay), signed so the standardwebhooks library verifies them; traces go out over
// OTLP/HTTP from the request's waitUntil, with the traceparent sent upstream.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { call, client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { startReceiver, type Receiver } from '../stubs/webhook-receiver.ts';

let w: TestWorker;
let rx: Receiver;
let upstream: OpenAIStub;
const spans: any[] = [];
const otlp = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
    res.writeHead(200).end('{}');
  });
});

before(async () => {
  await new Promise<void>((ok) => otlp.listen(0, '127.0.0.1', ok));
  [rx, upstream] = await Promise.all([startReceiver(), startOpenAIStub()]);
  w = await startWorker({
    vars: {
      AI_FETCH_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_BASE_MS: '100',
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: upstream.url,
      TEXTPROVIDER_MODELS: 'stub-model',
      BALANCE_INITIAL_CREDITS: '1000',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(otlp.address() as AddressInfo).port}`,
    },
  });
  assert.equal((await call(w.url, 'GET', '/health')).status, 200, w.logs());
});
after(async () => {
  await w?.stop();
  await Promise.all([rx?.close(), upstream?.close()]);
  otlp.closeAllConnections();
  otlp.close();
});

test('webhooks on Workers (D1, Queues): signed, retried through the queue, balance.low once', async () => {
  const admin = client(w.url, await w.adminKey());
  assert.equal((await admin.post('/v1/cities/create', { city_id: 'edge-wh', name: 'e' })).status, 200);
  const ep = await admin.post('/v1/webhooks/create', { city_id: 'edge-wh', url: rx.url, events: ['city.paused', 'balance.low', 'user.created'] });
  assert.equal(ep.status, 200, ep.text);
  assert.equal((await admin.post('/v1/webhooks/alerts/update', { city_id: 'edge-wh', balance_low: 500 })).status, 200);
  rx.plan = (d) => (d.body.includes('city.paused') && d.n <= 2 ? 500 : 200);
  assert.equal((await admin.post('/v1/cities/tokens/apply', { city_id: 'edge-wh', user_id: 'eve' })).status, 200);
  assert.equal((await admin.post('/v1/cities/pause', { city_id: 'edge-wh' })).status, 200);
  const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => admin.post('/v1/balance/adjust', { city_id: 'edge-wh', user_id: 'eve', credits: -60, reason: 'r', idempotency_key: `e${i}` })));
  assert.ok(rs.every((r) => r.status === 200));
  const verified = () =>
    rx.deliveries.filter((d) => {
      try {
        new Webhook(ep.body.secret).verify(d.body, d.headers as Record<string, string>);
        return d.answered === 200;
      } catch {
        return false;
      }
    });
  await until('three events delivered', () => new Set(verified().map((d) => JSON.parse(d.body).type)).size === 3, 60_000);
  const paused = rx.deliveries.filter((d) => d.body.includes('city.paused'));
  assert.deepEqual(paused.map((d) => d.answered), [500, 500, 200]);
  assert.ok(paused.every((d) => d.body === paused[0].body));
  assert.equal(verified().filter((d) => d.body.includes('balance.low')).length, 1, 'balance.low once');
});

test('traces on Workers: exported from waitUntil; the upstream call carries a traceparent', async () => {
  const admin = client(w.url, await w.adminKey());
  await admin.post('/v1/cities/create', { city_id: 'edge-tr', name: 't' });
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'edge-tr', user_id: 'tra' })).body.user_token;
  const traceId = 'aaf92f3577b34da6a3ce929d0e0e4736';
  const r = await call(w.url, 'POST', '/v1/ai/chat/completions', { token, headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` }, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
  assert.equal(r.status, 200, r.text);
  await until('spans', () => spans.filter((s) => s.traceId === traceId).length >= 2, 30_000);
  const client_ = spans.find((s) => s.traceId === traceId && s.kind === 3);
  assert.equal(client_.attributes.find((a: any) => a.key === 'gen_ai.request.model').value.stringValue, 'stub-model');
  assert.equal(upstream.requests.at(-1)!.headers.traceparent, `00-${traceId}-${client_.spanId}-01`);
});
