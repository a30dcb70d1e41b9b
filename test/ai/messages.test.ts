// POST /v1/ai/messages (the Anthropic Messages API) through @anthropic-ai/sdk and the AI SDK's
// Anthropic provider, on an Anthropic-native upstream (forwarded) and on an OpenAI-compatible
// upstream that only serves chat/completions (translated); every call charged exactly what
// the upstream reported, once.
import { createAnthropic } from '@ai-sdk/anthropic';
import Anthropic from '@anthropic-ai/sdk';
import { generateText, streamText } from 'ai';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, client } from '../helpers/http.ts';
import { countWords, promptTokens } from '../stubs/openai.ts';
import { cost, drain, startApiWorld, type ApiWorld } from './apis-setup.ts';

let w: ApiWorld;
before(async () => {
  w = await startApiWorld();
});
after(() => w?.close());

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
/** The SDK as Claude Code configures it: base URL {base}/v1/ai, the user token. */
const sdkFor = (token: string) => new Anthropic({ baseURL: `${w.gw.url}/v1/ai`, authToken: token, maxRetries: 0 });
const lastChat = () => [...w.openai.requests].reverse().find((r) => r.path === '/v1/chat/completions')!;
const lastNative = () => w.anthropic.requests.at(-1)!;
const text = (m: Anthropic.Message) => m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');

/** What the chat-only stub reports for the last chat request it served. */
function chatUsage(replyText: string) {
  const body = lastChat().body as any;
  return { input: promptTokens(body.messages), output: countWords(replyText) };
}

describe('Messages API on an Anthropic upstream (forwarded)', () => {
  test('plain: the upstream message as is, its key (not the user token) upstream, charged its usage', async () => {
    const t = await w.user('native');
    const b0 = await w.balance(t);
    const m = await sdkFor(t).messages.create({ model: 'claude', max_tokens: 100, system: 'be brief', messages: [{ role: 'user', content: 'hello there' }] });
    assert.equal(text(m), 'Hello from anthropic stub: hello there');
    assert.deepEqual([m.usage.input_tokens, m.usage.output_tokens, m.stop_reason], [7, 6, 'end_turn']);
    const up = lastNative();
    assert.equal(up.path, '/v1/messages');
    assert.equal(up.body.model, 'claude-sonnet-4-5');
    assert.equal(up.headers['x-api-key'], w.anthropic.apiKey);
    assert.equal(up.headers.authorization, undefined, 'the user token stays with citygate');
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - (cost(7, 6)))), cost(7, 6));
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.mode, rec.status, rec.model, rec.input_tokens, rec.output_tokens, rec.credits], ['messages', 'ok', 'claude', 7, 6, cost(7, 6)]);
  });

  test('streamed: the upstream events relayed; charged once by message_start + message_delta usage', async () => {
    const t = await w.user('native-stream');
    const b0 = await w.balance(t);
    const s = sdkFor(t).messages.stream({ model: 'claude', max_tokens: 100, messages: [{ role: 'user', content: 'one two three' }] });
    let streamed = '';
    s.on('text', (x) => (streamed += x));
    const m = await s.finalMessage();
    assert.equal(streamed, 'Hello from anthropic stub: one two three');
    assert.deepEqual([m.usage.input_tokens, m.usage.output_tokens], [6, 7]);
    assert.equal(await w.balanceBecomes(t, b0 - cost(6, 7)), b0 - cost(6, 7));
    const recs = await w.records(t, 1);
    assert.equal(recs.length, 1);
    assert.deepEqual([recs[0].mode, recs[0].input_tokens, recs[0].output_tokens, recs[0].credits], ['messages', 6, 7, cost(6, 7)]);
  });

  test('tool use round trip, an image block, stop_sequences; anthropic-beta travels upstream', async () => {
    const t = await w.user('native-tools');
    const sdk = sdkFor(t);
    const tools: Anthropic.Tool[] = [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
    const msgs: Anthropic.MessageParam[] = [{ role: 'user', content: 'Paris' }];
    const first = await sdk.messages.create({ model: 'claude', max_tokens: 100, tools, messages: msgs }, { headers: { 'anthropic-beta': 'fine-grained-tool-streaming-2025-05-14' } });
    assert.equal(lastNative().headers['anthropic-beta'], 'fine-grained-tool-streaming-2025-05-14');
    const use = first.content[0] as Anthropic.ToolUseBlock;
    assert.deepEqual([first.stop_reason, use.name, use.input], ['tool_use', 'get_weather', { city: 'Paris' }]);
    msgs.push({ role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny 21C' }] });
    assert.equal(text(await sdk.messages.create({ model: 'claude', max_tokens: 100, tools, messages: msgs })), 'Tool result received: sunny 21C');
    const img = await sdk.messages.create({
      model: 'claude',
      max_tokens: 100,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }, { type: 'text', text: 'what is it' }] }],
    });
    assert.equal(text(img), 'Hello from anthropic stub: what is it [image: image/png]');
    const stop = await sdk.messages.create({ model: 'claude', max_tokens: 100, stop_sequences: ['stub'], messages: [{ role: 'user', content: 'x' }] });
    assert.deepEqual([stop.stop_reason, stop.stop_sequence], ['stop_sequence', 'stub']);
  });

  test('a client abort mid-stream: the upstream request aborted, the input it reported and the relayed output charged, recorded as aborted', async () => {
    const t = await w.user('native-abort');
    const b0 = await w.balance(t);
    const gone = w.anthropic.disconnects;
    const ac = new AbortController();
    const s = sdkFor(t).messages.stream({ model: 'claude-slow', max_tokens: 1000, messages: [{ role: 'user', content: 'go' }] }, { signal: ac.signal });
    let n = 0;
    s.on('text', () => {
      if (++n === 3) ac.abort();
    });
    await s.done().catch(() => {});
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.mode, rec.status, rec.error_code, rec.input_tokens, rec.estimated], ['messages', 'aborted', 'client_closed_request', 4, true]);
    assert.ok(rec.output_tokens >= 3 && rec.output_tokens < 20, `output: one token per relayed delta, got ${rec.output_tokens}`);
    assert.equal(rec.credits, cost(4, rec.output_tokens));
    assert.equal(await w.balanceBecomes(t, b0 - rec.credits), b0 - rec.credits, 'charged the record, the rest of the 1000-token hold released');
    for (const end = Date.now() + 3000; w.anthropic.disconnects === gone && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    assert.equal(w.anthropic.disconnects, gone + 1, 'the upstream request was aborted');
  });

  test('count_tokens is exact from the upstream and free', async () => {
    const t = await w.user('native-count');
    const b0 = await w.balance(t);
    const c = await sdkFor(t).messages.countTokens({ model: 'claude', messages: [{ role: 'user', content: 'a b c' }] });
    assert.equal(c.input_tokens, 6);
    assert.equal(lastNative().path, '/v1/messages/count_tokens');
    assert.equal(await w.balance(t), b0);
  });
});

describe('Messages API on a chat/completions-only upstream (translated)', () => {
  test('plain: system and user reach chat/completions; the answer is a Messages API message; charged its usage', async () => {
    const t = await w.user('xlate');
    const b0 = await w.balance(t);
    const m = await sdkFor(t).messages.create({ model: 'stub-model', max_tokens: 100, system: 'be brief', messages: [{ role: 'user', content: 'hello there' }] });
    assert.equal(text(m), 'Hello from stub: hello there');
    const up = lastChat().body as any;
    assert.deepEqual(up.messages, [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello there' }]);
    assert.equal(up.max_tokens, 100);
    const u = chatUsage(text(m));
    assert.deepEqual([m.usage.input_tokens, m.usage.output_tokens, m.stop_reason, m.type, m.role], [u.input, u.output, 'end_turn', 'message', 'assistant']);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - (cost(u.input, u.output)))), cost(u.input, u.output));
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.mode, rec.status, rec.credits], ['messages', 'ok', cost(u.input, u.output)]);
  });

  test('streamed: message_start … message_stop; usage asked for upstream and charged once by it', async () => {
    const t = await w.user('xlate-stream');
    const b0 = await w.balance(t);
    const s = sdkFor(t).messages.stream({ model: 'stub-model', max_tokens: 100, messages: [{ role: 'user', content: 'one two three four' }] });
    const types: string[] = [];
    let streamed = '';
    s.on('streamEvent', (e) => types.push(e.type));
    s.on('text', (x) => (streamed += x));
    const m = await s.finalMessage();
    assert.equal(streamed, 'Hello from stub: one two three four');
    assert.equal(types[0], 'message_start');
    assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
    assert.ok(types.includes('content_block_delta'));
    const up = lastChat().body as any;
    assert.equal(up.stream, true);
    assert.deepEqual(up.stream_options, { include_usage: true }, 'usage asked for');
    const u = chatUsage(streamed);
    assert.deepEqual([m.usage.input_tokens, m.usage.output_tokens], [u.input, u.output]);
    const want = b0 - cost(u.input, u.output);
    assert.equal(await w.balanceBecomes(t, want), want);
    const recs = await w.records(t, 1);
    assert.equal(recs.length, 1, 'one record');
    assert.deepEqual([recs[0].input_tokens, recs[0].output_tokens, recs[0].credits], [u.input, u.output, cost(u.input, u.output)]);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await w.balance(t), want, 'charged once');
  });

  test('tool use round trip (plain and streamed), an image block, stop_sequences', async () => {
    const t = await w.user('xlate-tools');
    const sdk = sdkFor(t);
    const tools: Anthropic.Tool[] = [{ name: 'get_weather', description: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
    const msgs: Anthropic.MessageParam[] = [{ role: 'user', content: 'Paris' }];
    const first = await sdk.messages.create({ model: 'stub-model', max_tokens: 100, tools, tool_choice: { type: 'auto' }, messages: msgs });
    const use = first.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
    assert.equal(first.stop_reason, 'tool_use');
    assert.deepEqual([use.name, use.input], ['get_weather', { city: 'Paris' }]);
    const upTools = (lastChat().body as any).tools;
    assert.equal(upTools[0].function.name, 'get_weather');
    msgs.push({ role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny 21C' }] });
    const second = await sdk.messages.create({ model: 'stub-model', max_tokens: 100, tools, messages: msgs });
    assert.equal(text(second), 'Tool result received: sunny 21C');
    const upMsgs = (lastChat().body as any).messages;
    assert.equal(upMsgs.at(-1).role, 'tool');
    assert.equal(upMsgs.at(-1).tool_call_id, use.id);
    assert.equal(upMsgs.at(-2).tool_calls[0].function.name, 'get_weather');

    const streamedUse = await sdk.messages.stream({ model: 'stub-model', max_tokens: 100, tools, messages: [{ role: 'user', content: 'Rome' }] }).finalMessage();
    const su = streamedUse.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
    assert.deepEqual([streamedUse.stop_reason, su.name, su.input], ['tool_use', 'get_weather', { city: 'Rome' }]);

    const img = await sdk.messages.create({
      model: 'stub-model',
      max_tokens: 100,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }, { type: 'text', text: 'what is it' }] }],
    });
    assert.equal(text(img), 'Hello from stub: what is it');
    const parts = (lastChat().body as any).messages[0].content;
    assert.deepEqual(parts.map((p: any) => p.type), ['image_url', 'text']);
    assert.equal(parts[0].image_url.url, `data:image/png;base64,${PNG}`);

    await sdk.messages.create({ model: 'stub-model', max_tokens: 100, stop_sequences: ['END'], messages: [{ role: 'user', content: 'x' }] });
    assert.deepEqual((lastChat().body as any).stop, ['END']);
  });

  test('concurrent streams of one user: each charged exactly once by its reported usage', async () => {
    const t = await w.user('xlate-many');
    const b0 = await w.balance(t);
    const prompts = ['a', 'b c', 'd e f', 'g h i j', 'k l m n o', 'p q r s t u'];
    const sdk = sdkFor(t);
    const finals = await Promise.all(prompts.map((p) => sdk.messages.stream({ model: 'stub-model', max_tokens: 100, messages: [{ role: 'user', content: p }] }).finalMessage()));
    let want = 0;
    prompts.forEach((p, i) => {
      const input = countWords(p) + 3; // the stub's prompt_tokens for one user message
      const output = countWords(`Hello from stub: ${p}`);
      assert.deepEqual([finals[i].usage.input_tokens, finals[i].usage.output_tokens], [input, output]);
      want += cost(input, output);
    });
    assert.equal(await w.balanceBecomes(t, b0 - want), b0 - want);
    const recs = await w.records(t, prompts.length);
    assert.equal(recs.length, prompts.length);
    assert.equal(recs.reduce((s: number, r: any) => s + r.credits, 0), want);
    assert.ok(recs.every((r: any) => r.status === 'ok' && r.mode === 'messages'));
  });

  test('a client abort mid-stream: the upstream call is aborted, the hold released, what was relayed charged and recorded as aborted', async () => {
    const t = await w.user('xlate-abort');
    const b0 = await w.balance(t);
    const gone = w.openai.disconnects;
    const ac = new AbortController();
    const s = sdkFor(t).messages.stream({ model: 'stub-stream-slow', max_tokens: 1000, messages: [{ role: 'user', content: 'go' }] }, { signal: ac.signal });
    let n = 0;
    s.on('text', () => {
      if (++n === 3) ac.abort();
    });
    await s.done().catch(() => {});
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.mode, rec.status, rec.error_code, rec.estimated], ['messages', 'aborted', 'client_closed_request', true]);
    assert.ok(rec.output_tokens >= 3 && rec.output_tokens < 20, `output estimated from what was relayed: ${rec.output_tokens}`);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - rec.credits)), rec.credits, 'charged the recorded amount, not the 1000-token hold');
    assert.ok(rec.credits > 0 && rec.credits < cost(0, 1000));
    for (const end = Date.now() + 3000; w.openai.disconnects === gone && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    assert.equal(w.openai.disconnects, gone + 1, 'the upstream request was aborted');
  });

  test('count_tokens is an estimate and free', async () => {
    const t = await w.user('xlate-count');
    const b0 = await w.balance(t);
    const calls = w.openai.requestCount;
    const c = await sdkFor(t).messages.countTokens({ model: 'stub-model', messages: [{ role: 'user', content: 'a'.repeat(400) }] });
    assert.equal(c.input_tokens, 100);
    assert.equal(w.openai.requestCount, calls);
    assert.equal(await w.balance(t), b0);
  });

  test('the AI SDK’s Anthropic provider (x-api-key) works against citygate, plain and streamed', async () => {
    const t = await w.user('aisdk');
    const anthropic = createAnthropic({ baseURL: `${w.gw.url}/v1/ai/v1`, apiKey: t });
    for (const model of ['stub-model', 'claude']) {
      const r = await generateText({ model: anthropic(model), prompt: 'alpha beta', maxRetries: 0 });
      assert.match(r.text, /^Hello from (anthropic )?stub: alpha beta$/);
      assert.ok((r.usage.inputTokens ?? 0) > 0);
      const s = streamText({ model: anthropic(model), prompt: 'gamma', maxRetries: 0 });
      assert.match(await s.text, /^Hello from (anthropic )?stub: gamma$/);
    }
  });
});

describe('Messages API: credentials, money and errors in Anthropic’s shape', () => {
  const post = (path: string, headers: Record<string, string>, body: unknown) =>
    call(w.gw.url, 'POST', path, { headers: { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'whatever-2099', ...headers }, body });
  const ok = { model: 'stub-model', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };

  test('the user token as x-api-key or bearer, at /messages and /v1/messages; anthropic headers ignored', async () => {
    const t = await w.user('headers');
    for (const path of ['/v1/ai/messages', '/v1/ai/v1/messages']) {
      assert.equal((await post(path, { 'x-api-key': t }, ok)).status, 200);
      assert.equal((await post(path, { authorization: `Bearer ${t}` }, ok)).status, 200);
    }
    assert.equal((await post('/v1/ai/v1/messages/count_tokens', { 'x-api-key': t }, { model: 'claude', messages: ok.messages })).status, 200);
  });

  test('the Anthropic SDK’s models.list() lists the callable models that speak the Messages API', async () => {
    const t = await w.user('models');
    const ids: string[] = [];
    for await (const m of sdkFor(t).models.list()) ids.push(m.id);
    assert.ok(ids.includes('claude') && ids.includes('stub-model'), ids.join());
    assert.ok(!ids.includes('embed-small'), 'not an embedding model');
    assert.ok(!ids.includes('anthropic/claude-sonnet-4-5'), 'not callable without its key');
  });

  test('a bad token → 401 authentication_error, through the SDK (bearer) and x-api-key', async () => {
    await assert.rejects(sdkFor('not-a-token').messages.create(ok as any), (e: unknown) => {
      assert.ok(e instanceof Anthropic.AuthenticationError);
      assert.equal((e as any).error.type, 'error');
      assert.equal((e as any).error.error.type, 'authentication_error');
      return true;
    });
    const r = await post('/v1/ai/v1/messages', { 'x-api-key': 'nope' }, ok);
    assert.equal(r.status, 401);
    assert.deepEqual(Object.keys(r.body), ['type', 'error']);
    assert.equal(r.body.error.type, 'authentication_error');
    const none = await post('/v1/ai/v1/messages', {}, ok);
    assert.deepEqual([none.status, none.body.type, none.body.error.type], [401, 'error', 'authentication_error']);
  });

  test('no credits → 402 billing_error before any upstream call, on both upstream kinds', async () => {
    const t = await w.user('broke');
    await drain(w, t);
    const before = [w.openai.requestCount, w.anthropic.messageCalls];
    for (const model of ['stub-model', 'claude']) {
      await assert.rejects(sdkFor(t).messages.create({ ...ok, model } as any), (e: unknown) => {
        assert.equal((e as any).status, 402);
        assert.deepEqual([(e as any).error.type, (e as any).error.error.type], ['error', 'billing_error']);
        return true;
      });
      await assert.rejects(sdkFor(t).messages.stream({ ...ok, model } as any).finalMessage(), (e: unknown) => (e as any).status === 402);
    }
    assert.deepEqual([w.openai.requestCount, w.anthropic.messageCalls], before, 'no upstream call');
  });

  test('bad input → 400 invalid_request_error, a foreign city_id → 403, an unknown model → 404; nothing charged', async () => {
    const t = await w.user('bad');
    const b0 = await w.balance(t);
    const noMax = await post('/v1/ai/v1/messages', { 'x-api-key': t }, { model: 'stub-model', messages: ok.messages });
    assert.deepEqual([noMax.status, noMax.body.error.type], [400, 'invalid_request_error']);
    assert.match(noMax.body.error.message, /max_tokens/);
    const city = await post('/v1/ai/v1/messages', { 'x-api-key': t }, { ...ok, city_id: 'not-mine' });
    assert.deepEqual([city.status, city.body.error.type], [403, 'permission_error']);
    const mine = await post('/v1/ai/v1/messages', { 'x-api-key': t }, { ...ok, model: 'claude', city_id: w.owner(t).city });
    assert.equal(mine.status, 200);
    assert.equal(lastNative().body.city_id, undefined, 'city_id is citygate’s, not sent upstream');
    const unknown = await post('/v1/ai/v1/messages', { 'x-api-key': t }, { ...ok, model: 'nope' });
    assert.deepEqual([unknown.status, unknown.body.error.type], [404, 'not_found_error']);
    const badTemp = await post('/v1/ai/v1/messages', { 'x-api-key': t }, { ...ok, temperature: 7 });
    assert.deepEqual([badTemp.status, badTemp.body.error.type], [400, 'invalid_request_error']);
    assert.match(badTemp.body.error.message, /^temperature: /, 'a translated call names the field it cannot carry');
    const charged = (await w.records(t, 1)).filter((r: any) => r.status === 'ok').reduce((s: number, r: any) => s + r.credits, 0);
    const spent = b0 - (await w.balanceBecomes(t, b0 - charged)); // settled just after the answer on PostgreSQL
    assert.equal(spent, charged, 'only the one good call is charged');
    assert.equal((await client(w.gw.url, t).get('/v1/usage/me')).body.items.length, 1);
  });
});
