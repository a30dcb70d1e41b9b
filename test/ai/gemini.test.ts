// Google Gemini through the AI SDK (@ai-sdk/google), end to end against the Gemini stub
// (test/stubs/gemini.ts): chat/completions translated to generateContent (JSON) and
// streamGenerateContent (SSE), citygate's own text and stream actions, embeddings through
// embedMany (batchEmbedContents), each charged exactly what it used; and an upstream that
// refuses citygate's key, which is the gateway's problem (502), not the caller's.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { geminiVector, startGeminiStub, type GeminiStub } from '../stubs/gemini.ts';
import { PRICE } from './apis-setup.ts';
import { chargedOnce, lastUIMessage, RICH_USERS, tokenFor } from './setup.ts';

// Gemini models are configured the documented way (docs/ai.md): a provider of kind 'google'
// in citygate.config.ts, its key and base URL from the env.
const CONFIG = `
export default {
  ai: {
    providers: [
      { id: 'gemini', kind: 'google', apiKeyEnv: 'GEMINI_KEY', baseUrlEnv: 'GEMINI_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1beta' },
      { id: 'gemini-badkey', kind: 'google', apiKeyEnv: 'GEMINI_WRONG_KEY', baseUrlEnv: 'GEMINI_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1beta' },
    ],
    models: [
      { id: 'flash', name: 'Gemini (stub)', provider: 'gemini', upstream: 'gemini-2.5-flash', modes: ['text', 'stream', 'compat'] },
      { id: 'gembed', name: 'Gemini embeddings (stub)', provider: 'gemini', upstream: 'gemini-embedding-001', modes: ['embeddings'] },
      { id: 'flash-broken', name: 'Gemini failing mid-stream', provider: 'gemini', upstream: 'gemini-stream-error', modes: ['compat'] },
      { id: 'flash-badkey', name: 'Gemini, wrong key', provider: 'gemini-badkey', upstream: 'gemini-2.5-flash', modes: ['text', 'stream', 'compat'] },
      { id: 'gembed-badkey', name: 'Gemini embeddings, wrong key', provider: 'gemini-badkey', upstream: 'gemini-embedding-001', modes: ['embeddings'] },
    ],
  },
};
`;

let stub: GeminiStub;
let gw: TestGateway;
let admin: ReturnType<typeof client>;
before(async () => {
  stub = await startGeminiStub();
  const dir = tempDir('citygate-gemini-');
  writeFileSync(join(dir, 'citygate.config.ts'), CONFIG);
  const priced = Object.fromEntries(['flash', 'gembed', 'flash-broken', 'flash-badkey', 'gembed-badkey'].map((id) => [id, PRICE]));
  gw = await startGateway({
    dir,
    env: {
      ...RICH_USERS,
      TEXTPROVIDER_API_KEY: 'unused',
      GEMINI_KEY: stub.apiKey,
      GEMINI_WRONG_KEY: 'not-the-key',
      GEMINI_URL: stub.url,
      MODEL_PRICES: JSON.stringify(priced),
      AI_UPSTREAM_TIMEOUT_MS: '60000',
      // one upstream answer per call, and no cooldown of the wrong-key upstream between tests
      AI_MAX_ATTEMPTS: '1',
      AI_COOLDOWN_FAILURES: '1000',
    },
  });
  admin = client(gw.url, gw.adminKey);
});
after(async () => {
  await gw?.stop();
  await stub?.close();
});

let n = 0;
/** A fresh user in its own city, and its balance before any call. */
async function user(name: string) {
  const token = await tokenFor(admin, `gemini-${name}-${++n}`, name);
  const start = (await client(gw.url, token).get('/v1/balance/me')).body.credits as number;
  return { token, start, u: client(gw.url, token), openai: new OpenAI({ baseURL: `${gw.url}/v1/ai`, apiKey: token, maxRetries: 0 }) };
}
const lastTo = (suffix: string) => [...stub.requests].reverse().find((r) => r.path.endsWith(suffix))!;
/** Vectors equal value for value; a short message (a 3072-long diff takes seconds to print). */
function sameVectors(got: number[][], want: number[][]) {
  assert.deepEqual(got.map((v) => v.length), want.map((v) => v.length), 'dimensions');
  got.forEach((v, i) => {
    const at = v.findIndex((x, j) => x !== want[i][j]);
    assert.equal(at, -1, `vector ${i} differs at ${at}: ${v[at]} ≠ ${want[i][at]}`);
  });
}
/** PRICE: 1 credit per input token, 2 per output token. */
const cost = (input: number, output: number) => input + 2 * output;

describe('chat/completions on a Gemini model', () => {
  test('JSON: the stub’s text and usage in OpenAI’s shape; charged exactly that usage', async () => {
    const { token, start, openai } = await user('json');
    const r = await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello there' }] });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.model, 'flash');
    assert.deepEqual(r.choices.map((c) => [c.message.role, c.message.content, c.finish_reason]), [['assistant', 'Hello from gemini stub: hello there', 'stop']]);
    // promptTokenCount: 2 (system) + 1 + 2; candidatesTokenCount: 6 words
    assert.deepEqual([r.usage?.prompt_tokens, r.usage?.completion_tokens, r.usage?.total_tokens], [5, 6, 11]);
    const up = lastTo(':generateContent');
    assert.equal(up.path, '/v1beta/models/gemini-2.5-flash:generateContent', 'the upstream id goes upstream');
    assert.equal(up.headers['x-goog-api-key'], stub.apiKey);
    assert.deepEqual(up.body.systemInstruction, { parts: [{ text: 'be brief' }] });
    assert.deepEqual(up.body.contents, [{ role: 'user', parts: [{ text: 'hello there' }] }]);
    const { records } = await chargedOnce(gw.url, token, start, cost(5, 6), { records: 1 });
    const [rec] = records;
    assert.deepEqual([rec.mode, rec.status, rec.model, rec.input_tokens, rec.output_tokens, rec.credits, rec.estimated ?? false], ['compat', 'ok', 'flash', 5, 6, cost(5, 6), false]);
  });

  test('streamed: the stub’s words as chunks, then finish_reason and the usage chunk; charged exactly that usage', async () => {
    const { token, start, openai } = await user('stream');
    const s = await openai.chat.completions.create({ model: 'flash', stream: true, stream_options: { include_usage: true }, max_tokens: 100, messages: [{ role: 'user', content: 'a b c' }] });
    const deltas: string[] = [];
    const finishes: string[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const c of s) {
      assert.equal(c.object, 'chat.completion.chunk');
      if (c.choices[0]?.delta?.content) deltas.push(c.choices[0].delta.content);
      if (c.choices[0]?.finish_reason) finishes.push(c.choices[0].finish_reason);
      if (c.usage) usage = c.usage;
    }
    assert.equal(deltas.join(''), 'Hello from gemini stub: a b c');
    assert.ok(deltas.length >= 7, `one chunk per upstream event: ${JSON.stringify(deltas)}`);
    assert.deepEqual(finishes, ['stop']);
    // The stub sends usageMetadata in every event (candidates so far): the last one counts.
    assert.deepEqual([usage?.prompt_tokens, usage?.completion_tokens, usage?.total_tokens], [4, 7, 11]);
    const up = lastTo(':streamGenerateContent');
    assert.deepEqual([up.path, up.query.alt, up.body.generationConfig.maxOutputTokens], ['/v1beta/models/gemini-2.5-flash:streamGenerateContent', 'sse', 100]);
    const { records } = await chargedOnce(gw.url, token, start, cost(4, 7), { records: 1 });
    assert.deepEqual([records[0].mode, records[0].status, records[0].input_tokens, records[0].output_tokens], ['compat', 'ok', 4, 7]);
  });

  test('a stream whose upstream reports an error after its first event ends in the one error shape with the upstream’s reason', async () => {
    const { u } = await user('broken');
    const r = await u.post('/v1/ai/chat/completions', { model: 'flash-broken', stream: true, messages: [{ role: 'user', content: 'x y' }] });
    assert.equal(r.status, 200, 'the stream had begun');
    const events = r.text.split('\n\n').filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]').map((e) => JSON.parse(e.slice(6)));
    assert.equal(events.map((e) => e.choices?.[0]?.delta?.content ?? '').join(''), 'Hello', 'what came before the failure');
    const err = events.at(-1).error;
    assert.ok(err && err.type && err.code && err.message, JSON.stringify(events.at(-1)));
    // Google's in-stream {"error": {"code": 500, "status": "INTERNAL", …}}: the upstream failed,
    // said with its reason (not "an unusable response", not citygate's own 500)
    assert.deepEqual([err.code, err.message], ['upstream_error', 'The upstream provider failed (500): An internal error has occurred.']);
    const [rec] = await until('the usage record', async () => (await u.get('/v1/usage/me')).body.items?.length && (await u.get('/v1/usage/me')).body.items);
    assert.deepEqual([rec.model, rec.status, rec.error_code], ['flash-broken', 'error', err.code], JSON.stringify(rec));
  });
});

describe('citygate’s own text actions on a Gemini model', () => {
  test('POST /v1/ai/text and /v1/ai/stream: the stub’s text, its usage, charged exactly that', async () => {
    const { token, start, u } = await user('text');
    const r = await u.post('/v1/ai/text', { model: 'flash', system: 'sys', prompt: 'one two' });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.parts, [{ type: 'text', text: 'Hello from gemini stub: one two' }]);
    assert.deepEqual(r.body.metadata.usage, { input_tokens: 4, output_tokens: 6, cached_tokens: 0, total_tokens: 10 });
    assert.equal(r.body.metadata.finish_reason, 'stop');
    assert.deepEqual(lastTo(':generateContent').body.systemInstruction, { parts: [{ text: 'sys' }] });

    const res = await fetch(`${gw.url}/v1/ai/stream`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'flash', prompt: 'tell me' }) });
    assert.equal(res.status, 200);
    const last = await lastUIMessage(res.body!);
    assert.equal(last?.parts.filter((p) => p.type === 'text').map((p: any) => p.text).join(''), 'Hello from gemini stub: tell me');
    assert.deepEqual((last?.metadata as any).usage, { input_tokens: 3, output_tokens: 6, cached_tokens: 0, total_tokens: 9 });
    const { records } = await chargedOnce(gw.url, token, start, cost(4, 6) + cost(3, 6), { records: 2 });
    assert.deepEqual(records.map((x: any) => [x.mode, x.status, x.credits]).sort(), [['stream', 'ok', cost(3, 6)], ['text', 'ok', cost(4, 6)]]);
  });
});

describe('embeddings on a Gemini model (embedMany → batchEmbedContents)', () => {
  test('the stub’s vectors in OpenAI’s shape (float and base64); metered by the documented estimate, as Gemini reports no tokens', async () => {
    const { token, start, openai } = await user('embed');
    const f = await openai.embeddings.create({ model: 'gembed', input: ['alpha beta', 'gamma'], encoding_format: 'float' });
    assert.equal(f.object, 'list');
    assert.equal(f.model, 'gembed');
    assert.deepEqual(f.data.map((d) => [d.object, d.index]), [['embedding', 0], ['embedding', 1]]);
    sameVectors(f.data.map((d) => d.embedding), [geminiVector('alpha beta', 3072), geminiVector('gamma', 3072)]);
    const up = lastTo(':batchEmbedContents');
    assert.equal(up.path, '/v1beta/models/gemini-embedding-001:batchEmbedContents');
    assert.equal(up.headers['x-goog-api-key'], stub.apiKey);
    assert.deepEqual(up.body.requests.map((x: any) => x.content.parts), [[{ text: 'alpha beta' }], [{ text: 'gamma' }]]);
    // base64 (the openai client's default) and dimensions → outputDimensionality
    const b = await openai.embeddings.create({ model: 'gembed', input: ['delta epsilon', 'zeta'], dimensions: 8 });
    sameVectors(b.data.map((d) => d.embedding), [geminiVector('delta epsilon', 8), geminiVector('zeta', 8)]);
    assert.deepEqual(lastTo(':batchEmbedContents').body.requests.map((x: any) => x.outputDimensionality), [8, 8]);
    // Gemini's embeddings API reports no token counts: the call is charged the estimate
    // (docs/money.md): ⌈UTF-8 bytes of the input strings / 4⌉ tokens, and says so.
    const est1 = Math.ceil(('alpha beta'.length + 'gamma'.length) / 4);
    const est2 = Math.ceil(('delta epsilon'.length + 'zeta'.length) / 4);
    assert.deepEqual([f.usage.prompt_tokens, f.usage.total_tokens, b.usage.prompt_tokens], [est1, est1, est2], 'the usage shown is the usage charged');
    const { records } = await chargedOnce(gw.url, token, start, est1 + est2, { records: 2 });
    assert.deepEqual(records.map((x: any) => [x.mode, x.status, x.model, x.input_tokens, x.output_tokens, x.credits, x.estimated]).sort(), [
      ['embeddings', 'ok', 'gembed', est1, 0, est1, true],
      ['embeddings', 'ok', 'gembed', est2, 0, est2, true],
    ].sort());
  });
});

describe('an upstream that refuses citygate’s key', () => {
  test('Google’s 400 API_KEY_INVALID is the gateway’s fault: 502 upstream_auth_failed in the one error shape, nothing charged', async () => {
    const { token, start, u } = await user('badkey');
    const before = stub.requests.length;
    const calls = [
      ['/v1/ai/chat/completions', { model: 'flash-badkey', messages: [{ role: 'user', content: 'x' }] }],
      ['/v1/ai/chat/completions', { model: 'flash-badkey', stream: true, messages: [{ role: 'user', content: 'x' }] }],
      ['/v1/ai/text', { model: 'flash-badkey', prompt: 'x' }],
      ['/v1/ai/stream', { model: 'flash-badkey', prompt: 'x' }],
      ['/v1/ai/embeddings', { model: 'gembed-badkey', input: ['x', 'y'] }],
    ] as const;
    for (const [path, body] of calls) {
      const r = await u.post(path, body);
      const e = errorOf(r);
      assert.deepEqual([r.status, e.code], [502, 'upstream_auth_failed'], `${path} ${JSON.stringify(body)}: ${r.text}`);
      assert.ok(!r.text.includes('not-the-key'), 'no credential in the answer');
    }
    const seen = stub.requests.slice(before);
    assert.equal(seen.length, calls.length, 'each call reached the upstream once');
    assert.ok(seen.every((q) => q.headers['x-goog-api-key'] === 'not-the-key'));
    const { records } = await chargedOnce(gw.url, token, start, 0, { records: calls.length });
    assert.ok(records.every((x: any) => x.status === 'error' && x.error_code === 'upstream_auth_failed' && x.credits === 0), JSON.stringify(records));
  });
});
