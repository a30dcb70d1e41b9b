// Google's Gemini API surface (/v1/ai/v1beta, /v1/ai/v1, /v1beta) through the real @google/genai
// client: forwarded to a Google upstream (the Gemini stub, reporting cached content) and
// translated for an OpenAI-compatible one (the OpenAI stub) — plain, streamed, function calling,
// countTokens and embeddings — each call charged exactly (Σ usage credits = the balance drop),
// the user token in x-goog-api-key, ?key= or a bearer token (?key= never in the logs or the
// request logs), errors in Google's shape.
import { FunctionCallingConfigMode, GoogleGenAI, type Content } from '@google/genai';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync, existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { sqlAll } from '../helpers/sql.ts';
import { until } from '../helpers/wait.ts';
import { geminiVector, promptTokenCount, startGeminiStub, type GeminiStub } from '../stubs/gemini.ts';
import { countWords, promptTokens } from '../stubs/openai.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { chargedOnce, tokenFor } from './setup.ts';

const CONFIG = `
export default {
  ai: {
    providers: [
      { id: 'gemini', kind: 'google', apiKeyEnv: 'GEMINI_KEY', baseUrlEnv: 'GEMINI_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1beta' },
    ],
    models: [
      { id: 'gflash', name: 'Gemini (stub)', provider: 'gemini', upstream: 'gemini-2.5-flash', modes: ['text', 'stream', 'compat'] },
      { id: 'gflash-broken', name: 'Gemini failing mid-stream', provider: 'gemini', upstream: 'gemini-stream-error', modes: ['compat'] },
      { id: 'gflash-slow', name: 'Gemini, slow stream', provider: 'gemini', upstream: 'gemini-slow-stream', modes: ['compat'] },
      { id: 'gembed', name: 'Gemini embeddings (stub)', provider: 'gemini', upstream: 'gemini-embedding-001', modes: ['embeddings'] },
      { id: 'oembed', name: 'OpenAI-compatible embeddings', provider: 'textprovider', upstream: 'text-embedding-3-small', modes: ['embeddings'] },
    ],
  },
};
`;
/** Credits per token: 4 input, 1 cached input, 10 output. */
const PRICE = { input_per_mtok: 4_000_000, cached_per_mtok: 1_000_000, output_per_mtok: 10_000_000 };
const cost = (input: number, output: number, cached = 0) => 4 * (input - cached) + cached + 10 * output;
/** The Gemini stub reports this many prompt tokens as read from cached content, on every answer. */
const CACHED = 2;

let gemini: GeminiStub;
let openai: OpenAIStub;
let gw: TestGateway;
let admin: ReturnType<typeof client>;
before(async () => {
  gemini = await startGeminiStub({ cachedTokens: CACHED });
  openai = await startOpenAIStub();
  const dir = tempDir('citygate-gemini-api-');
  writeFileSync(join(dir, 'citygate.config.ts'), CONFIG);
  gw = await startGateway({
    dir,
    env: {
      GEMINI_KEY: gemini.apiKey,
      GEMINI_URL: gemini.url,
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: openai.url,
      TEXTPROVIDER_MODELS: 'stub-model',
      BALANCE_INITIAL_CREDITS: '100000000',
      USAGE_FLUSH_MS: '20',
      AI_UPSTREAM_TIMEOUT_MS: '60000',
      AI_MAX_ATTEMPTS: '1',
      REQUEST_LOG: 'full',
      MODEL_PRICES: JSON.stringify(Object.fromEntries(['gflash', 'gflash-broken', 'gflash-slow', 'gembed', 'oembed', 'stub-model'].map((id) => [id, PRICE]))),
    },
  });
  admin = client(gw.url, gw.adminKey);
});
after(async () => {
  await gw?.stop();
  await gemini?.close();
  await openai?.close();
});

let n = 0;
const tokens: string[] = [];
async function user(name: string) {
  const token = await tokenFor(admin, `gapi-${name}-${++n}`, name);
  tokens.push(token);
  const start = (await client(gw.url, token).get('/v1/balance/me')).body.credits as number;
  return { token, start };
}
/** The SDK as its users configure it: the default API version (v1) under /v1/ai, or v1beta at the gateway's root as Gemini CLI calls it. */
const sdk = (token: string, v: 'v1' | 'v1beta' = 'v1') =>
  new GoogleGenAI({ apiKey: token, httpOptions: v === 'v1' ? { baseUrl: `${gw.url}/v1/ai` } : { baseUrl: gw.url, apiVersion: 'v1beta' } });
const lastGemini = (suffix: string) => [...gemini.requests].reverse().find((r) => r.path.endsWith(suffix))!;
const lastChat = () => [...openai.requests].reverse().find((r) => r.path === '/v1/chat/completions')!;

const weather = {
  functionDeclarations: [{ name: 'get_weather', description: 'the weather of a city', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }],
};

describe('forwarded to a Google upstream', () => {
  test('plain (SDK default v1 under /v1/ai): the body as sent, the upstream id in the path, charged its usage with cached content', async () => {
    const { token, start } = await user('fwd-plain');
    const r = await sdk(token).models.generateContent({ model: 'gflash', contents: 'hello there', config: { systemInstruction: 'be brief', temperature: 0.5 } });
    assert.equal(r.text, 'Hello from gemini stub: hello there');
    const up = lastGemini(':generateContent');
    assert.equal(up.path, '/v1beta/models/gemini-2.5-flash:generateContent');
    assert.equal(up.headers['x-goog-api-key'], gemini.apiKey, 'citygate’s key upstream, not the user’s token');
    assert.equal(up.query.key, undefined);
    assert.deepEqual(up.body.contents, [{ role: 'user', parts: [{ text: 'hello there' }] }]);
    assert.deepEqual(up.body.systemInstruction, { parts: [{ text: 'be brief' }], role: 'user' });
    assert.equal(up.body.generationConfig.temperature, 0.5);
    const prompt = promptTokenCount(up.body);
    assert.deepEqual([r.usageMetadata?.promptTokenCount, r.usageMetadata?.candidatesTokenCount, r.usageMetadata?.cachedContentTokenCount], [prompt, 6, CACHED]);
    const { records } = await chargedOnce(gw.url, token, start, cost(prompt, 6, CACHED), { records: 1 });
    assert.deepEqual([records[0].mode, records[0].status, records[0].model, records[0].input_tokens, records[0].cached_tokens, records[0].output_tokens], ['gemini', 'ok', 'gflash', prompt, CACHED, 6]);
  });

  test('streamed (v1beta at the root, as Gemini CLI): SSE relayed, charged once by the last usageMetadata', async () => {
    const { token, start } = await user('fwd-stream');
    const s = await sdk(token, 'v1beta').models.generateContentStream({ model: 'gflash', contents: 'a b c' });
    let text = '';
    let last: any;
    for await (const c of s) {
      text += c.text ?? '';
      last = c;
    }
    assert.equal(text, 'Hello from gemini stub: a b c');
    assert.equal(last.candidates[0].finishReason, 'STOP');
    const up = lastGemini(':streamGenerateContent');
    assert.deepEqual([up.path, up.query.alt], ['/v1beta/models/gemini-2.5-flash:streamGenerateContent', 'sse']);
    const prompt = promptTokenCount(up.body);
    const { records } = await chargedOnce(gw.url, token, start, cost(prompt, 7, CACHED), { records: 1 });
    assert.deepEqual([records[0].mode, records[0].input_tokens, records[0].cached_tokens, records[0].output_tokens, records[0].estimated ?? false], ['gemini', prompt, CACHED, 7, false]);
  });

  test('function calling round trip: functionCall out, functionResponse back', async () => {
    const { token, start } = await user('fwd-tools');
    const ai = sdk(token);
    const contents: Content[] = [{ role: 'user', parts: [{ text: 'Paris' }] }];
    const first = await ai.models.generateContent({ model: 'gflash', contents, config: { tools: [weather], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } } } });
    assert.deepEqual(first.functionCalls?.map((c) => [c.name, c.args]), [['get_weather', { city: 'Paris' }]]);
    const p1 = promptTokenCount(lastGemini(':generateContent').body);
    contents.push(first.candidates![0].content!, { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { result: 'sunny 21C' } } }] });
    const second = await ai.models.generateContent({ model: 'gflash', contents, config: { tools: [weather] } });
    assert.equal(second.text, 'Tool result received: {"result":"sunny 21C"}');
    const up = lastGemini(':generateContent').body;
    assert.deepEqual(up.contents.at(-1).parts[0].functionResponse, { name: 'get_weather', response: { result: 'sunny 21C' } });
    const p2 = promptTokenCount(up);
    const o1 = first.usageMetadata!.candidatesTokenCount!;
    const o2 = second.usageMetadata!.candidatesTokenCount!;
    await chargedOnce(gw.url, token, start, cost(p1, o1, CACHED) + cost(p2, o2, CACHED), { records: 2 });
  });

  test('a client that goes away mid-stream: the upstream request aborted, one record, charged the usage reported so far (estimated)', async () => {
    const { token, start } = await user('fwd-abort');
    const gone = gemini.disconnects;
    const ac = new AbortController();
    const s = await sdk(token).models.generateContentStream({ model: 'gflash-slow', contents: 'go', config: { abortSignal: ac.signal, maxOutputTokens: 1000 } });
    let n = 0;
    await assert.rejects(async () => {
      for await (const _ of s) if (++n === 3) ac.abort();
    });
    const rec = await until('the aborted record', async () => ((await client(gw.url, token).get('/v1/usage/me')).body.items ?? [])[0]);
    assert.deepEqual([rec.mode, rec.status, rec.error_code, rec.estimated, rec.input_tokens, rec.cached_tokens], ['gemini', 'aborted', 'client_closed_request', true, 2, CACHED]);
    assert.ok(rec.output_tokens >= 3 && rec.output_tokens < 20, `output: the candidates reported so far, got ${rec.output_tokens}`);
    await chargedOnce(gw.url, token, start, cost(2, rec.output_tokens, CACHED), { records: 1 });
    await until('the upstream request aborted', () => gemini.disconnects > gone);
  });

  test('countTokens is exact from the upstream and free', async () => {
    const { token, start } = await user('fwd-count');
    const c = await sdk(token).models.countTokens({ model: 'gflash', contents: 'one two three' });
    assert.equal(c.totalTokens, 4);
    assert.equal(lastGemini(':countTokens').path, '/v1beta/models/gemini-2.5-flash:countTokens');
    // the whole-request form names the model: the upstream's id goes there too
    const whole = await call(gw.url, 'POST', '/v1/ai/v1beta/models/gflash:countTokens', {
      headers: { 'x-goog-api-key': token },
      body: { generateContentRequest: { model: 'models/gflash', contents: [{ role: 'user', parts: [{ text: 'one two three' }] }], systemInstruction: { parts: [{ text: 'sys' }] } } },
    });
    assert.deepEqual([whole.status, whole.body.totalTokens], [200, 5], whole.text);
    assert.equal(lastGemini(':countTokens').body.generateContentRequest.model, 'models/gemini-2.5-flash');
    assert.equal((await client(gw.url, token).get('/v1/balance/me')).body.credits, start);
  });

  test('embeddings (batchEmbedContents, the model ids rewritten) charged by the documented estimate; embedContent by hand', async () => {
    const { token, start } = await user('fwd-embed');
    const e = await sdk(token).models.embedContent({ model: 'gembed', contents: ['alpha beta', 'gamma'], config: { outputDimensionality: 8 } });
    assert.deepEqual(e.embeddings?.map((x) => x.values), [geminiVector('alpha beta', 8), geminiVector('gamma', 8)]);
    const up = lastGemini(':batchEmbedContents');
    assert.equal(up.path, '/v1beta/models/gemini-embedding-001:batchEmbedContents');
    assert.deepEqual(up.body.requests.map((q: any) => q.model), ['models/gemini-embedding-001', 'models/gemini-embedding-001']);
    const one = await call(gw.url, 'POST', '/v1/ai/v1beta/models/gembed:embedContent', { headers: { 'x-goog-api-key': token }, body: { content: { parts: [{ text: 'delta' }] } } });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body.embedding.values, geminiVector('delta', 3072));
    const est1 = Math.ceil('alpha betagamma'.length / 4);
    const est2 = Math.ceil('delta'.length / 4);
    const { records } = await chargedOnce(gw.url, token, start, 4 * (est1 + est2), { records: 2 });
    assert.ok(records.every((r: any) => r.mode === 'embeddings' && r.estimated === true), JSON.stringify(records));
  });

  test('the JSON-array stream (no alt=sse): the same responses as one array; an upstream error mid-stream ends it in Google’s shape', async () => {
    const { token } = await user('fwd-array');
    const r = await call(gw.url, 'POST', '/v1/ai/v1beta/models/gflash:streamGenerateContent', { headers: { 'x-goog-api-key': token }, body: { contents: [{ parts: [{ text: 'x y' }] }] } });
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get('content-type')!, /application\/json/);
    assert.equal(lastGemini(':streamGenerateContent').query.alt, 'sse', 'upstream: SSE, re-framed');
    const arr = JSON.parse(r.text);
    assert.equal(arr.map((x: any) => x.candidates[0].content.parts[0].text).join(''), 'Hello from gemini stub: x y');
    const broken = await call(gw.url, 'POST', '/v1/ai/v1beta/models/gflash-broken:streamGenerateContent?alt=sse', { headers: { 'x-goog-api-key': token }, body: { contents: [{ parts: [{ text: 'x y' }] }] } });
    assert.equal(broken.status, 200);
    const events = broken.text.split(/\r?\n\r?\n/).filter(Boolean).map((e) => JSON.parse(e.slice(6)));
    assert.deepEqual(Object.keys(events.at(-1).error).sort(), ['code', 'message', 'status']);
    const rec = await until('the broken stream’s record', async () => ((await client(gw.url, token).get('/v1/usage/me')).body.items ?? []).find((x: any) => x.model === 'gflash-broken'));
    assert.deepEqual([rec.status, rec.error_code], ['error', 'upstream_stream_failed']);
  });
});

describe('translated for an OpenAI-compatible upstream', () => {
  test('plain: system instruction and multi-turn contents reach chat/completions; the answer in Google’s shape; charged its usage', async () => {
    const { token, start } = await user('xl-plain');
    const contents: Content[] = [
      { role: 'user', parts: [{ text: 'hi' }] },
      { role: 'model', parts: [{ text: 'hello' }] },
      { role: 'user', parts: [{ text: 'hello there' }] },
    ];
    const r = await sdk(token).models.generateContent({ model: 'stub-model', contents, config: { systemInstruction: 'be brief', maxOutputTokens: 50, stopSequences: ['ZZZ'], thinkingConfig: { thinkingBudget: 100 } } });
    assert.equal(r.text, 'Hello from stub: hello there');
    assert.equal(r.candidates?.[0].finishReason, 'STOP');
    const up = lastChat().body as any;
    assert.deepEqual(up.messages, [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      { role: 'user', content: 'hello there' },
    ]);
    assert.deepEqual([up.max_tokens, up.stop], [50, ['ZZZ']]);
    assert.equal(up.reasoning_effort, undefined, 'thinkingConfig is dropped');
    const input = promptTokens(up.messages);
    const output = countWords(r.text!);
    assert.deepEqual([r.usageMetadata?.promptTokenCount, r.usageMetadata?.candidatesTokenCount], [input, output]);
    const { records } = await chargedOnce(gw.url, token, start, cost(input, output), { records: 1 });
    assert.deepEqual([records[0].mode, records[0].model, records[0].input_tokens, records[0].output_tokens], ['gemini', 'stub-model', input, output]);
  });

  test('streamed: Google’s events, the finish reason and usage on the last; charged once', async () => {
    const { token, start } = await user('xl-stream');
    const s = await sdk(token).models.generateContentStream({ model: 'stub-model', contents: 'one two three' });
    let text = '';
    let last: any;
    for await (const c of s) {
      text += c.text ?? '';
      last = c;
    }
    assert.equal(text, 'Hello from stub: one two three');
    assert.equal(last.candidates[0].finishReason, 'STOP');
    const up = lastChat().body as any;
    assert.deepEqual([up.stream, up.stream_options], [true, { include_usage: true }]);
    const input = promptTokens(up.messages);
    const output = countWords(text);
    assert.deepEqual([last.usageMetadata.promptTokenCount, last.usageMetadata.candidatesTokenCount], [input, output]);
    await chargedOnce(gw.url, token, start, cost(input, output), { records: 1 });
  });

  test('function calling (plain and streamed): declarations become tools, the call comes back as functionCall, its response as a tool message', async () => {
    const { token, start } = await user('xl-tools');
    const ai = sdk(token);
    const contents: Content[] = [{ role: 'user', parts: [{ text: 'Paris' }] }];
    const config = { tools: [weather], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: ['get_weather'] } } };
    const first = await ai.models.generateContent({ model: 'stub-model', contents, config });
    const fc = first.functionCalls![0];
    assert.deepEqual([fc.name, fc.args], ['get_weather', { city: 'Paris' }]);
    const up1 = lastChat().body as any;
    assert.equal(up1.tools[0].function.name, 'get_weather');
    assert.deepEqual(up1.tool_choice, { type: 'function', function: { name: 'get_weather' } });
    const u1 = [promptTokens(up1.messages), countWords(JSON.stringify({ city: 'Paris' }))];
    contents.push(first.candidates![0].content!, { role: 'user', parts: [{ functionResponse: { id: fc.id, name: 'get_weather', response: { result: 'sunny' } } }] });
    const second = await ai.models.generateContent({ model: 'stub-model', contents, config: { tools: [weather] } });
    assert.equal(second.text, 'Tool result received: {"result":"sunny"}');
    const up2 = lastChat().body as any;
    assert.equal(up2.messages.at(-2).tool_calls[0].id, fc.id);
    assert.deepEqual([up2.messages.at(-1).role, up2.messages.at(-1).tool_call_id], ['tool', fc.id]);
    const u2 = [promptTokens(up2.messages), countWords(second.text!)];
    // streamed, a function call without an id paired by name
    const s = await ai.models.generateContentStream({ model: 'stub-model', contents: 'Rome', config: { tools: [weather] } });
    const calls: any[] = [];
    for await (const c of s) calls.push(...(c.functionCalls ?? []));
    assert.deepEqual(calls.map((c) => [c.name, c.args]), [['get_weather', { city: 'Rome' }]]);
    const up3 = lastChat().body as any;
    const u3 = [promptTokens(up3.messages), countWords(JSON.stringify({ city: 'Rome' }))];
    await chargedOnce(gw.url, token, start, cost(u1[0], u1[1]) + cost(u2[0], u2[1]) + cost(u3[0], u3[1]), { records: 3 });
  });

  test('curl’s snake_case fields are read too; thoughts of earlier turns are not replayed; a hosted tool is left out and said so', async () => {
    const { token } = await user('xl-snake');
    const r = await call(gw.url, 'POST', '/v1/ai/v1beta/models/stub-model:generateContent', {
      headers: { 'x-goog-api-key': token },
      body: {
        system_instruction: { parts: [{ text: 'be brief' }] },
        contents: [
          { role: 'user', parts: [{ text: 'hi' }] },
          { role: 'model', parts: [{ text: 'pondering', thought: true }] },
          { role: 'user', parts: [{ text: 'again' }] },
        ],
        generation_config: { max_output_tokens: 20, stop_sequences: ['ZZZ'] },
        tools: [{ google_search: {} }],
      },
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('x-citygate-dropped-tools'), 'googleSearch');
    const up = lastChat().body as any;
    assert.deepEqual(up.messages, [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
      { role: 'user', content: 'again' },
    ]);
    assert.deepEqual([up.max_tokens, up.stop, up.tools], [20, ['ZZZ'], undefined]);
  });

  test('inline data: an image part reaches chat/completions as an image', async () => {
    const { token } = await user('xl-image');
    const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const r = await sdk(token).models.generateContent({ model: 'stub-model', contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'image/png', data: PNG } }, { text: 'what is it' }] }] });
    assert.equal(r.text, 'Hello from stub: what is it');
    const parts = (lastChat().body as any).messages[0].content;
    assert.deepEqual(parts.map((p: any) => p.type), ['image_url', 'text']);
    assert.equal(parts[0].image_url.url, `data:image/png;base64,${PNG}`);
  });

  test('countTokens is an estimate and free; embeddings through the upstream’s /embeddings, charged its usage', async () => {
    const { token, start } = await user('xl-count');
    const calls = openai.requestCount;
    const c = await sdk(token).models.countTokens({ model: 'stub-model', contents: 'a'.repeat(400) });
    assert.equal(c.totalTokens, 100);
    assert.equal(openai.requestCount, calls, 'no upstream call');
    const e = await sdk(token).models.embedContent({ model: 'oembed', contents: ['alpha beta', 'gamma'] });
    assert.equal(e.embeddings?.length, 2);
    assert.equal(e.embeddings![0].values!.length, 1536);
    // the OpenAI stub's usage: Σ words of the inputs
    await chargedOnce(gw.url, token, start, 4 * 3, { records: 1 });
  });
});

describe('credentials, models and errors in Google’s shape', () => {
  const body = { contents: [{ parts: [{ text: 'hi' }] }] };
  test('the token as x-goog-api-key, ?key= or bearer, at /v1beta, /v1/ai/v1beta and /v1/ai/v1', async () => {
    const { token } = await user('creds');
    for (const path of ['/v1beta/models/stub-model:generateContent', '/v1/ai/v1beta/models/stub-model:generateContent', '/v1/ai/v1/models/gflash:generateContent']) {
      assert.equal((await call(gw.url, 'POST', path, { headers: { 'x-goog-api-key': token }, body })).status, 200, path);
      assert.equal((await call(gw.url, 'POST', `${path}?key=${token}`, { body })).status, 200, path);
      assert.equal((await call(gw.url, 'POST', path, { token, body })).status, 200, path);
    }
  });

  test('?key= is in no log line and no request log', async () => {
    const { token } = await user('key-query');
    const r = await call(gw.url, 'POST', `/v1beta/models/gflash:streamGenerateContent?alt=sse&key=${token}`, { body });
    assert.equal(r.status, 200);
    const id = r.headers.get('x-request-id')!;
    const row = await until('the request log', async () => (await sqlAll<any>(gw, 'SELECT * FROM request_logs WHERE request_id = ?', [id]))[0]);
    const log = (await call(gw.url, 'GET', `/v1/usage/request-log?request_id=${id}`, { token: gw.adminKey })).body;
    assert.equal(log.request.path, '/v1beta/models/gflash:streamGenerateContent?alt=sse&key=[redacted]');
    assert.equal(log.response.body.candidates[0].content.parts[0].text, 'Hello from gemini stub: hi', 'the stream assembled');
    const filesDir = join(dirname(gw.dbPath), 'files', 'request-logs');
    const blobs: string[] = [];
    const walk = (d: string) => existsSync(d) && readdirSync(d).forEach((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : blobs.push(readFileSync(join(d, f), 'utf8'))));
    walk(filesDir);
    const stored = JSON.stringify(await sqlAll(gw, 'SELECT * FROM request_logs')) + blobs.join('\n') + JSON.stringify(row);
    for (const t of tokens) {
      assert.ok(!stored.includes(t), 'no token in the request logs');
      assert.ok(!gw.stdout().includes(t) && !gw.stderr().includes(t), 'no token in the gateway’s logs');
    }
  });

  test('models list and get, Google’s shape, on v1beta and the SDK’s v1', async () => {
    const { token } = await user('models');
    const ids: string[] = [];
    for await (const m of await sdk(token).models.list()) ids.push(m.name!);
    assert.ok(ids.includes('models/gflash') && ids.includes('models/stub-model') && ids.includes('models/gembed'), ids.join());
    const beta: string[] = [];
    for await (const m of await sdk(token, 'v1beta').models.list()) beta.push(m.name!);
    assert.deepEqual(beta.sort(), ids.sort());
    const m = await sdk(token, 'v1beta').models.get({ model: 'gembed' });
    assert.deepEqual([m.name, m.supportedActions], ['models/gembed', ['embedContent', 'batchEmbedContents']]);
    const missing = await call(gw.url, 'GET', '/v1/ai/v1beta/models/nope', { headers: { 'x-goog-api-key': token } });
    assert.deepEqual([missing.status, missing.body.error.code, missing.body.error.status], [404, 404, 'NOT_FOUND']);
  });

  test('bad input and credentials: Google-shaped 4xx naming the field; nothing charged', async () => {
    const { token, start } = await user('bad');
    const post = (path: string, b: unknown, headers: Record<string, string> = { 'x-goog-api-key': token }) => call(gw.url, 'POST', path, { headers, body: b });
    const shape = (r: Awaited<ReturnType<typeof post>>, status: number, gstatus: string, re?: RegExp) => {
      assert.equal(r.status, status, r.text);
      assert.deepEqual(Object.keys(r.body), ['error']);
      assert.deepEqual([r.body.error.code, r.body.error.status], [status, gstatus], r.text);
      if (re) assert.match(r.body.error.message, re);
    };
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent', {}), 400, 'INVALID_ARGUMENT', /^contents: /);
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent', { contents: [{ role: 'bot', parts: [{ text: 'x' }] }] }), 400, 'INVALID_ARGUMENT', /contents\.0\.role/);
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent', { ...body, generationConfig: { temperature: 9 } }), 400, 'INVALID_ARGUMENT', /generationConfig\.temperature/);
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent', { ...body, generationConfig: { candidateCount: 2 } }), 400, 'INVALID_ARGUMENT', /candidateCount/);
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent', { ...body, cachedContent: 'cachedContents/abc' }), 400, 'INVALID_ARGUMENT', /^cachedContent: /);
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent', '{"contents": ['), 400, 'INVALID_ARGUMENT');
    shape(await post('/v1/ai/v1beta/models/nope:generateContent', body), 404, 'NOT_FOUND');
    shape(await post('/v1/ai/v1beta/models/stub-model:fly', body), 404, 'NOT_FOUND');
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent', body, { 'x-goog-api-key': 'not-a-token' }), 401, 'UNAUTHENTICATED');
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent?key=nope', body, {}), 401, 'UNAUTHENTICATED');
    shape(await post('/v1/ai/v1beta/models/stub-model:generateContent', body, {}), 401, 'UNAUTHENTICATED');
    await assert.rejects(sdk('not-a-token').models.generateContent({ model: 'gflash', contents: 'x' }), (e: any) => e.status === 401 && /invalid_token/.test(e.message));
    assert.equal((await client(gw.url, token).get('/v1/balance/me')).body.credits, start);
    assert.equal(((await client(gw.url, token).get('/v1/usage/me')).body.items ?? []).length, 0);
  });
});
