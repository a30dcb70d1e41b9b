// OpenTelemetry traces (issue 28): with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a local
// OTLP/HTTP receiver, a chat call that needs two upstream attempts (the first gets a 500) is one
// server span (route, status, city, hashed user) and one client span per attempt with the GenAI
// attributes, under the caller's traceparent; each attempt's upstream request carried its own
// traceparent. Without the variable the tracer is never loaded (the module trace shows it).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

type OtlpSpan = { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes: { key: string; value: Record<string, unknown> }[]; status: { code: number } };

const TRACE = resolve(import.meta.dirname, '../helpers/module-trace.ts');
let upstream: OpenAIStub;
let gw: TestGateway;
let off: TestGateway;
const offModules = join(tempDir('citygate-modules-'), 'loaded.txt');
const spans: OtlpSpan[] = [];
const exports: { path: string; contentType: string; resource: unknown }[] = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    exports.push({ path: req.url ?? '', contentType: String(req.headers['content-type']), resource: body.resourceSpans[0].resource });
    for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});

before(async () => {
  await new Promise<void>((ok) => receiver.listen(0, '127.0.0.1', ok));
  upstream = await startOpenAIStub();
  const base = {
    TEXTPROVIDER_API_KEY: 'sk-stub',
    TEXTPROVIDER_BASE_URL: upstream.url,
    TEXTPROVIDER_MODELS: 'stub-model',
    MODEL_PRICES: JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } }),
    BALANCE_INITIAL_CREDITS: '1000000',
    AI_MAX_ATTEMPTS: '2',
    AI_RETRY_BACKOFF_MS: '1',
  };
  [gw, off] = await Promise.all([
    startGateway({ env: { ...base, OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'citygate-test' } }),
    startGateway({ env: { ...base, NODE_OPTIONS: `--import ${TRACE}`, MODULE_TRACE_FILE: offModules } }),
  ]);
});
after(async () => {
  await Promise.all([gw?.stop(), off?.stop()]);
  await upstream?.close();
  receiver.closeAllConnections();
  receiver.close();
});

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes.find((a) => a.key === key)?.value;
  return v === undefined ? undefined : (v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue)));
};

test('one server span and one child span per upstream attempt, with the GenAI attributes, under the caller’s traceparent; the upstream calls carry theirs', async () => {
  const admin = client(gw.url, gw.adminKey);
  assert.equal((await admin.post('/v1/cities/create', { city_id: 'trace-city', name: 't' })).status, 200);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'trace-city', user_id: 'tia' })).body.user_token;
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const parent = '00f067aa0ba902b7';
  upstream.setFault({ status: 500, times: 1 });
  const seen = upstream.requests.length;
  const r = await call(gw.url, 'POST', '/v1/ai/chat/completions', {
    token,
    headers: { traceparent: `00-${traceId}-${parent}-01` },
    body: { model: 'stub-model', max_tokens: 8, messages: [{ role: 'user', content: 'one two three' }] },
  });
  assert.equal(r.status, 200, r.text);

  const mine = () => spans.filter((s) => s.traceId === traceId);
  await until('3 spans exported', () => mine().length >= 3, 20_000);
  const server = mine().filter((s) => s.kind === 2);
  const attempts = mine().filter((s) => s.kind === 3);
  assert.equal(server.length, 1);
  assert.equal(attempts.length, 2, 'one span per upstream attempt');
  const s = server[0];
  assert.equal(s.parentSpanId, parent, 'the incoming traceparent is the parent');
  assert.equal(s.name, 'POST /v1/ai/chat/completions');
  assert.equal(attr(s, 'http.route'), '/v1/ai/chat/completions');
  assert.equal(attr(s, 'http.response.status_code'), 200);
  assert.equal(attr(s, 'citygate.city'), 'trace-city');
  const hashed = attr(s, 'user.hash') as string;
  assert.match(hashed, /^[0-9a-f]{32}$/);
  assert.equal(hashed, createHash('sha256').update('trace-city\ntia').digest('hex').slice(0, 32));
  assert.ok(!JSON.stringify(s).includes('tia'), 'the user id itself is not exported');

  const [failed, ok] = attempts.sort((a, b) => Number(attr(a, 'error.type') === undefined) - Number(attr(b, 'error.type') === undefined));
  for (const a of attempts) {
    assert.equal(a.parentSpanId, s.spanId);
    assert.equal(attr(a, 'gen_ai.operation.name'), 'chat');
    assert.equal(attr(a, 'gen_ai.request.model'), 'stub-model');
    assert.equal(attr(a, 'gen_ai.response.model'), 'stub-model');
    assert.ok(attr(a, 'gen_ai.provider.name'));
    assert.equal(a.name, 'chat stub-model');
  }
  assert.equal(attr(failed, 'error.type'), 'upstream_error');
  assert.equal(failed.status.code, 2);
  assert.equal(attr(ok, 'gen_ai.usage.input_tokens'), r.body.usage.prompt_tokens);
  assert.equal(attr(ok, 'gen_ai.usage.output_tokens'), r.body.usage.completion_tokens);
  assert.equal(attr(ok, 'citygate.credits'), r.body.usage.prompt_tokens + 2 * r.body.usage.completion_tokens);

  // Each attempt's request upstream carried a traceparent naming that attempt's span.
  const sent = upstream.requests.slice(seen).map((q) => String(q.headers.traceparent));
  assert.deepEqual(sent.sort(), [`00-${traceId}-${failed.spanId}-01`, `00-${traceId}-${ok.spanId}-01`].sort());
  assert.equal(exports[0].path, '/v1/traces');
  assert.equal(exports[0].contentType, 'application/json');
  assert.ok(JSON.stringify(exports[0].resource).includes('citygate-test'));
});

test('a stream’s attempt span ends with its usage; a call without a traceparent starts a trace of its own', async () => {
  const admin = client(gw.url, gw.adminKey);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'trace-city', user_id: 'tom' })).body.user_token;
  const before = new Set(spans.map((s) => s.traceId));
  const r = await call(gw.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'hi' }] } });
  assert.equal(r.status, 200);
  const span = (await until('a new trace with an attempt', () => spans.find((s) => !before.has(s.traceId) && s.kind === 3), 20_000)) as OtlpSpan;
  assert.ok((attr(span, 'gen_ai.usage.output_tokens') as number) > 0);
  const server = spans.find((s) => s.traceId === span.traceId && s.kind === 2)!;
  assert.equal(server.parentSpanId, undefined);
});

test('off: no tracer loaded, no traceparent sent upstream', async () => {
  const admin = client(off.url, off.adminKey);
  assert.equal((await admin.post('/v1/cities/create', { city_id: 'off-city', name: 'o' })).status, 200);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'off-city', user_id: 'u' })).body.user_token;
  const seen = upstream.requests.length;
  const r = await call(off.url, 'POST', '/v1/ai/chat/completions', { token, headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01' }, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
  assert.equal(r.status, 200, r.text);
  assert.equal(upstream.requests.slice(seen)[0].headers.traceparent, undefined);
  const loaded = existsSync(offModules) ? readFileSync(offModules, 'utf8') : '';
  assert.ok(loaded.includes('/src/kernel/gateway.ts'));
  assert.ok(!loaded.includes('/src/kernel/tracing/tracer.ts') && !loaded.includes('/src/kernel/tracing/otlp.ts'), 'the tracer is not loaded');
});
