// chat/completions, text and stream, seen through real clients: the openai package and the
// AI SDK, against citygate in front of the stub OpenAI upstream.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, streamText } from 'ai';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { call, client, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { lastUIMessage, startAiWorld, type AiWorld } from './setup.ts';

let w: AiWorld;
let openai: OpenAI;
before(async () => {
  w = await startAiWorld();
  openai = new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: w.alice, maxRetries: 0 });
});
after(() => w?.close());

const lastChat = () => [...w.stub.requests].reverse().find((r) => r.path === '/v1/chat/completions')!;

describe('the openai package against /v1/ai', () => {
  test('non-streaming: the upstream answer, byte for byte, with usage', async () => {
    const r = await openai.chat.completions.create({ model: 'stub-model', messages: [{ role: 'user', content: 'hello there' }] });
    assert.equal(r.choices[0].message.content, 'Hello from stub: hello there');
    assert.deepEqual([r.usage?.prompt_tokens, r.usage?.completion_tokens], [5, 5]);
    assert.equal(lastChat().headers.authorization, 'Bearer sk-stub', 'the provider key goes upstream, not the user token');
  });

  test('a body read in many pieces reaches the upstream as sent: 300 KB past one socket read, and chunked with characters split between chunks', async () => {
    const big = Array.from({ length: 10_000 }, (_, i) => `Grüße ${i} aus Zürich, 東京 🚀`).join(' '); // ~330 KB of UTF-8
    const r = await openai.chat.completions.create({ model: 'stub-model', messages: [{ role: 'user', content: big }] });
    const reply = r.choices[0].message.content ?? '';
    assert.ok(reply === `Hello from stub: ${big}`, `the reply echoes the 330 KB message (${reply.length} characters, ${big.length + 17} expected)`);
    const sent = (lastChat().body as any).messages[0].content as string;
    assert.ok(sent === big, `the upstream got the message as sent (${sent.length} characters of ${big.length})`);
    // no Content-Length: chunks cut inside 'ü', '東' and '🚀'
    const bytes = new TextEncoder().encode(JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'Grüße 東京 🚀 end' }] }));
    const cuts = [bytes.indexOf(0xbc) /* ü's 2nd byte */, bytes.indexOf(0xe6) + 1 /* inside 東 */, bytes.indexOf(0xf0) + 2 /* inside 🚀 */, bytes.length];
    const body = new ReadableStream<Uint8Array>({
      start(ctl) {
        let from = 0;
        for (const to of cuts) {
          ctl.enqueue(bytes.slice(from, to));
          from = to;
        }
        ctl.close();
      },
    });
    const res = await fetch(`${w.gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.alice}`, 'content-type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].message.content, 'Hello from stub: Grüße 東京 🚀 end');
    assert.equal((lastChat().body as any).messages[0].content, 'Grüße 東京 🚀 end');
  });

  test('streaming without include_usage: text assembled, usage measured upstream but not shown', async () => {
    const s = await openai.chat.completions.create({ model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'one two three' }] });
    let text = '';
    let usageChunks = 0;
    for await (const c of s) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usageChunks++;
    }
    assert.equal(text, 'Hello from stub: one two three');
    assert.equal(usageChunks, 0, 'the usage event citygate asked for is removed');
    assert.deepEqual((lastChat().body as any).stream_options, { include_usage: true }, 'usage is always measured');
  });

  test('streaming with include_usage: usage present', async () => {
    const s = await openai.chat.completions.create({
      model: 'stub-model',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'a b c d' }],
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const c of s) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    assert.equal(text, 'Hello from stub: a b c d');
    assert.equal(usage?.prompt_tokens, 7);
    assert.equal(usage?.completion_tokens, 7);
  });

  test('a tool call round trip', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Paris' }];
    const first = await openai.chat.completions.create({ model: 'stub-model', messages, tools, tool_choice: 'auto' });
    const tc = first.choices[0].message.tool_calls?.[0];
    assert.equal(first.choices[0].finish_reason, 'tool_calls');
    assert.ok(tc && tc.type === 'function');
    assert.equal(tc.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(tc.function.arguments), { city: 'Paris' });
    messages.push(first.choices[0].message, { role: 'tool', tool_call_id: tc.id, content: 'sunny 21C' });
    const second = await openai.chat.completions.create({ model: 'stub-model', messages, tools });
    assert.equal(second.choices[0].message.content, 'Tool result received: sunny 21C');
  });

  test('response_format, stop and max_tokens reach the upstream', async () => {
    const r = await openai.chat.completions.create({
      model: 'stub-model',
      messages: [{ role: 'user', content: 'alpha beta gamma delta' }],
      max_tokens: 3,
      stop: ['never'],
      response_format: { type: 'text' },
    });
    assert.equal(r.choices[0].message.content, 'Hello from stub:');
    assert.equal(r.choices[0].finish_reason, 'length');
    const sent = lastChat().body as any;
    assert.equal(sent.max_tokens, 3);
    assert.deepEqual(sent.stop, ['never']);
    assert.deepEqual(sent.response_format, { type: 'text' });
  });

  test('an aliased model (id=upstream_id) is sent upstream under its upstream id', async () => {
    const r = await openai.chat.completions.create({ model: 'aliased', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.choices[0].message.content, 'Hello from stub: hi');
    assert.equal((lastChat().body as any).model, 'stub-model');
  });

  test('every response carries x-citygate-overhead-ms and x-request-id', async () => {
    const r = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'stub-model', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('x-citygate-overhead-ms') ?? '', /^\d+\.\d\d$/);
    assert.match(r.headers.get('x-request-id') ?? '', /^req_/);
    const bad = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'nope', messages: [{ role: 'user', content: 'x' }] } });
    assert.match(bad.headers.get('x-citygate-overhead-ms') ?? '', /^\d+\.\d\d$/);
  });

  test('a streamed answer carries its own headers and the gateway\'s; a browser\'s (Origin) gets the CORS headers too, with the whole stream', async () => {
    const body = JSON.stringify({ model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'red green' }] });
    const send = (extra: Record<string, string> = {}) =>
      fetch(`${w.gw.url}/v1/ai/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${w.alice}`, 'content-type': 'application/json', ...extra }, body });
    const texts: string[] = [];
    for (const origin of [null, 'https://app.example.com']) {
      const res = await send(origin ? { origin } : {});
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
      assert.equal(res.headers.get('cache-control'), 'no-cache');
      assert.match(res.headers.get('x-request-id') ?? '', /^req_/);
      assert.match(res.headers.get('x-citygate-overhead-ms') ?? '', /^\d+\.\d\d$/);
      assert.equal(res.headers.get('access-control-allow-origin'), origin, origin ? 'a browser may read it' : 'no CORS headers without Origin');
      if (origin) assert.match(res.headers.get('access-control-expose-headers') ?? '', /x-request-id/);
      const text = await res.text();
      assert.match(text, /data: \[DONE\]\n\n$/, 'the stream ends with [DONE]');
      texts.push(text.replace(/"(id|created)":("[^"]*"|\d+)/g, '').replace(/stub\d+/g, ''));
    }
    assert.equal(texts[1], texts[0], 'the same events either way');
    assert.match(texts[0], /"content":" red"/);
  });
});

describe('the AI SDK', () => {
  const provider = () =>
    createOpenAICompatible({ name: 'citygate', baseURL: `${w.gw.url}/v1/ai`, apiKey: w.alice, includeUsage: true });

  test('generateText through createOpenAICompatible', async () => {
    const r = await generateText({ model: provider().chatModel('stub-model'), prompt: 'good morning', maxRetries: 0 });
    assert.equal(r.text, 'Hello from stub: good morning');
    assert.equal(r.usage.inputTokens, 5);
    assert.equal(r.usage.outputTokens, 5);
  });

  test('streamText through createOpenAICompatible', async () => {
    const r = streamText({ model: provider().chatModel('stub-model'), prompt: 'good evening', maxRetries: 0 });
    let text = '';
    for await (const t of r.textStream) text += t;
    assert.equal(text, 'Hello from stub: good evening');
    assert.equal((await r.totalUsage).outputTokens, 5);
  });

  test('readUIMessageStream over /v1/ai/stream (UI messages in, UI message stream out)', async () => {
    const res = await fetch(`${w.gw.url}/v1/ai/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'stub-model',
        id: 'chat-1',
        trigger: 'submit-message',
        messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'tell me' }] }],
      }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
    const last = await lastUIMessage(res.body!);
    assert.ok(last);
    assert.equal(last.role, 'assistant');
    const text = last.parts.filter((p) => p.type === 'text').map((p: any) => p.text).join('');
    assert.equal(text, 'Hello from stub: tell me');
    assert.equal((last.metadata as any).usage.output_tokens, 5);
  });
});

describe('POST /v1/ai/text', () => {
  test('prompt → one assistant message with metadata', async () => {
    const r = await client(w.gw.url, w.alice).post('/v1/ai/text', { model: 'stub-model', prompt: 'hi you', city_id: 'city-a' });
    assert.equal(r.status, 200);
    assert.match(r.body.id, /^msg_/);
    assert.equal(r.body.role, 'assistant');
    assert.deepEqual(r.body.parts, [{ type: 'text', text: 'Hello from stub: hi you' }]);
    assert.deepEqual(r.body.metadata.usage, { input_tokens: 5, output_tokens: 5, cached_tokens: 0, total_tokens: 10 });
    assert.equal(r.body.metadata.finish_reason, 'stop');
  });

  test('messages and system are accepted', async () => {
    const r = await client(w.gw.url, w.alice).post('/v1/ai/text', { model: 'stub-model', system: 'be brief', messages: [{ role: 'user', content: 'ok then' }], max_tokens: 50 });
    assert.equal(r.status, 200);
    assert.equal(r.body.parts[0].text, 'Hello from stub: ok then');
  });

  test('the seed rule: a city_id other than the token’s city → 403', async () => {
    const r = await client(w.gw.url, w.alice).post('/v1/ai/text', { model: 'stub-model', prompt: 'x', city_id: 'city-b' });
    assert.equal(r.status, 403);
    assert.equal(errorOf(r).code, 'city_mismatch');
  });

  test('bad input → 400 in the one error shape', async () => {
    const u = client(w.gw.url, w.alice);
    for (const body of [{ model: 'stub-model' }, { model: 'stub-model', prompt: 'x', messages: [{ role: 'user', content: 'y' }] }, { model: 'stub-model', prompt: 'x', temperature: 9 }, { prompt: 'x' }]) {
      const r = await u.post('/v1/ai/text', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      errorOf(r);
    }
    const r = await u.post('/v1/ai/chat/completions', { model: 'stub-model', messages: [] });
    assert.equal(r.status, 400);
  });

  test('no token → 401', async () => {
    const r = await client(w.gw.url).post('/v1/ai/text', { model: 'stub-model', prompt: 'x' });
    assert.equal(r.status, 401);
  });
});

describe('errors', () => {
  const chat = (model: string, extra: object = {}) =>
    call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model, messages: [{ role: 'user', content: 'x' }], ...extra } });

  test('unknown model → 404 model_not_found', async () => {
    const r = await chat('no-such-model');
    assert.equal(r.status, 404);
    assert.equal(errorOf(r).code, 'model_not_found');
    const t = await client(w.gw.url, w.alice).post('/v1/ai/text', { model: 'no-such-model', prompt: 'x' });
    assert.equal(t.status, 404);
  });

  test('a registered model without its key → 400; the admin is told the key, the user is not', async () => {
    const u = await chat('anthropic/claude-haiku-4-5');
    assert.equal(u.status, 400);
    assert.equal(errorOf(u).code, 'model_not_available');
    assert.doesNotMatch(errorOf(u).message, /ANTHROPIC/);
    const a = await call(w.gw.url, 'POST', '/v1/ai/text', { token: w.gw.adminKey, body: { model: 'anthropic/claude-haiku-4-5', prompt: 'x' } });
    assert.equal(a.status, 400);
    assert.match(errorOf(a).message, /ANTHROPIC_API_KEY/);
  });

  test('a mode the model does not support → 400', async () => {
    const r = await client(w.gw.url, w.alice).post('/v1/ai/image/create', { model: 'stub-model', prompt: 'a cat' });
    assert.equal(r.status, 400);
    assert.equal(errorOf(r).code, 'mode_not_supported');
  });

  test('upstream 500 → 502, JSON and streaming, through the openai package too', async () => {
    assert.equal((await chat('stub-500')).status, 502);
    assert.equal((await chat('stub-500', { stream: true })).status, 502);
    await assert.rejects(openai.chat.completions.create({ model: 'stub-500', messages: [{ role: 'user', content: 'x' }] }), (e: any) => e.status === 502 && e.error?.code === 'upstream_error');
    const t = await client(w.gw.url, w.alice).post('/v1/ai/text', { model: 'stub-500', prompt: 'x' });
    assert.equal(t.status, 502);
    const s = await client(w.gw.url, w.alice).post('/v1/ai/stream', { model: 'stub-500', prompt: 'x' });
    assert.equal(s.status, 502);
  });

  test('upstream 400 (context length) → 400 with the upstream’s reason', async () => {
    const r = await chat('stub-400');
    assert.equal(r.status, 400);
    assert.match(errorOf(r).message, /maximum context length/);
    const t = await client(w.gw.url, w.alice).post('/v1/ai/text', { model: 'stub-400', prompt: 'x' });
    assert.equal(t.status, 400);
    assert.match(errorOf(t).message, /maximum context length/);
  });

  test('upstream unreachable → 502', async () => {
    const r = await chat('unreachable');
    assert.equal(r.status, 502);
    assert.equal(errorOf(r).code, 'upstream_unavailable');
    const t = await client(w.gw.url, w.alice).post('/v1/ai/text', { model: 'unreachable', prompt: 'x' });
    assert.equal(t.status, 502);
  });

  test('a client abort mid-stream cancels the upstream request', async () => {
    const before = w.stub.disconnects;
    const ac = new AbortController();
    const res = await fetch(`${w.gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stub-stream-slow', stream: true, messages: [{ role: 'user', content: 'go' }] }),
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    await until('the stub to see the upstream request go away', () => w.stub.disconnects > before, 30_000);
    assert.equal(w.stub.disconnects, before + 1);
  });
  test('a client abort before the JSON answer cancels the upstream request', async () => {
    const before = w.stub.disconnects;
    const asked = () => w.stub.requests.filter((r) => (r.body as { model?: string })?.model === 'stub-slow').length;
    const asked0 = asked();
    const ac = new AbortController();
    const res = fetch(`${w.gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stub-slow', messages: [{ role: 'user', content: 'go' }] }),
      signal: ac.signal,
    }).catch((e: unknown) => e);
    await until('the stub to get the request', () => asked() > asked0, 30_000);
    ac.abort();
    await res;
    // stub-slow would answer (and finish the response) after 1.5 s: a disconnect is the cancel
    await until('the stub to see the upstream request go away', () => w.stub.disconnects > before, 30_000);
    assert.equal(w.stub.disconnects, before + 1);
  });
});

describe('translation through the AI SDK (an upstream without the pass-through)', () => {
  test('JSON, SSE with usage, and a tool call come back in the Chat Completions format', async () => {
    const o = new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: w.alice, maxRetries: 0 });
    const r = await o.chat.completions.create({ model: 'translated', messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'hi there' }] });
    assert.equal(r.choices[0].message.content, 'Hello from stub: hi there');
    assert.ok(r.usage && r.usage.completion_tokens === 5);
    const s = await o.chat.completions.create({ model: 'translated', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'a b' }] });
    let text = '';
    let usage;
    for await (const c of s) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    assert.equal(text, 'Hello from stub: a b');
    assert.ok(usage);
    const t = await o.chat.completions.create({
      model: 'translated',
      messages: [{ role: 'user', content: 'Rome' }],
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
    });
    assert.equal(t.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(JSON.parse(t.choices[0].message.tool_calls![0].type === 'function' ? (t.choices[0].message.tool_calls![0] as any).function.arguments : '{}'), { q: 'Rome' });
    const bad = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'translated', messages: [{ role: 'robot', content: 'x' }] } });
    assert.equal(bad.status, 400);
  });
});
