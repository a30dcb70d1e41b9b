// Proves the Gemini stub speaks the Generative Language API as the AI SDK's Google provider
// (@ai-sdk/google, what citygate uses) calls it: text, streams, tools, embeddings, errors.
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { APICallError, embedMany, generateText, jsonSchema, streamText, tool } from 'ai';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { geminiVector, startGeminiStub, type GeminiStub } from './gemini.ts';

let stub: GeminiStub;
let google: ReturnType<typeof createGoogleGenerativeAI>;
before(async () => {
  stub = await startGeminiStub();
  google = createGoogleGenerativeAI({ baseURL: stub.url, apiKey: stub.apiKey });
});
after(() => stub.close());

describe('the Gemini stub', () => {
  test('generateText: the reply, usage by the documented formula, the key sent as x-goog-api-key', async () => {
    const r = await generateText({ model: google('gemini-2.5-flash'), system: 'be brief', prompt: 'hello there', maxRetries: 0 });
    assert.equal(r.text, 'Hello from gemini stub: hello there');
    assert.equal(r.finishReason, 'stop');
    // prompt: 2 (system) + 1 + 2; candidates: the reply's 6 words
    assert.deepEqual([r.usage.inputTokens, r.usage.outputTokens], [5, 6]);
    const q = stub.requests.at(-1)!;
    assert.equal(q.path, '/v1beta/models/gemini-2.5-flash:generateContent');
    assert.equal(q.headers['x-goog-api-key'], stub.apiKey);
    assert.deepEqual(q.body.systemInstruction, { parts: [{ text: 'be brief' }] });
  });

  test('streamText: the words arrive as SSE events, the last usage is the answer', async () => {
    const s = streamText({ model: google('gemini-2.5-flash'), prompt: 'one two three', maxRetries: 0 });
    const deltas: string[] = [];
    for await (const t of s.textStream) deltas.push(t);
    assert.equal(deltas.join(''), 'Hello from gemini stub: one two three');
    assert.ok(deltas.length > 3, 'several events');
    const u = await s.usage;
    assert.deepEqual([u.inputTokens, u.outputTokens, await s.finishReason], [4, 7, 'stop']);
    const q = stub.requests.at(-1)!;
    assert.equal(q.path, '/v1beta/models/gemini-2.5-flash:streamGenerateContent');
    assert.equal(q.query.alt, 'sse');
  });

  test('tools: a function call, then its result; maxOutputTokens and stop sequences cut', async () => {
    const tools = { weather: tool({ inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } } }) }) };
    const first = await generateText({ model: google('gemini-2.5-flash'), tools, prompt: 'Paris', maxRetries: 0 });
    assert.deepEqual(first.toolCalls.map((c) => [c.toolName, c.input]), [['weather', { city: 'Paris' }]]);
    const second = await generateText({
      model: google('gemini-2.5-flash'),
      tools,
      messages: [
        { role: 'user', content: 'Paris' },
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'weather', input: { city: 'Paris' } }] },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'weather', output: { type: 'text', value: 'sunny' } }] },
      ],
      maxRetries: 0,
    });
    assert.match(second.text, /^Tool result received: .*sunny/);
    const cut = await generateText({ model: google('gemini-2.5-flash'), prompt: 'a b c d', maxOutputTokens: 3, maxRetries: 0 });
    assert.deepEqual([cut.text, cut.finishReason], ['Hello from gemini', 'length']);
    const stop = await generateText({ model: google('gemini-2.5-flash'), prompt: 'a b', stopSequences: ['stub'], maxRetries: 0 });
    assert.equal(stop.text, 'Hello from gemini ');
  });

  test('embedMany: batchEmbedContents vectors, no token counts (like Google)', async () => {
    const r = await embedMany({ model: google.embedding('gemini-embedding-001'), values: ['alpha beta', 'gamma'], maxRetries: 0 });
    assert.deepEqual(r.embeddings, [geminiVector('alpha beta', 3072), geminiVector('gamma', 3072)]);
    assert.ok(Number.isNaN(r.usage.tokens), 'the API reports no tokens');
    const q = stub.requests.at(-1)!;
    assert.equal(q.path, '/v1beta/models/gemini-embedding-001:batchEmbedContents');
    assert.deepEqual(q.body.requests.map((x: any) => x.model), ['models/gemini-embedding-001', 'models/gemini-embedding-001']);
    const small = await embedMany({ model: google.embedding('gemini-embedding-001'), values: ['x', 'y'], providerOptions: { google: { outputDimensionality: 8 } }, maxRetries: 0 });
    assert.deepEqual(small.embeddings[1], geminiVector('y', 8));
  });

  test("errors in Google's shape: a wrong key is a 400 API_KEY_INVALID, a failing model its status", async () => {
    const bad = createGoogleGenerativeAI({ baseURL: stub.url, apiKey: 'wrong' });
    await assert.rejects(generateText({ model: bad('gemini-2.5-flash'), prompt: 'x', maxRetries: 0 }), (e: unknown) => {
      assert.ok(APICallError.isInstance(e));
      assert.equal(e.statusCode, 400);
      const body = JSON.parse(e.responseBody!);
      assert.equal(body.error.status, 'INVALID_ARGUMENT');
      assert.equal(body.error.details[0].reason, 'API_KEY_INVALID');
      return true;
    });
    const none = await fetch(`${stub.url}/models/gemini-2.5-flash:generateContent`, { method: 'POST', body: '{}' });
    assert.equal(none.status, 403);
    await assert.rejects(generateText({ model: google('gemini-503'), prompt: 'x', maxRetries: 0 }), (e: unknown) => APICallError.isInstance(e) && e.statusCode === 503);
    const s = streamText({ model: google('gemini-stream-error'), prompt: 'x y', maxRetries: 0, onError: () => {} });
    const kinds: string[] = [];
    for await (const p of s.fullStream) kinds.push(p.type);
    assert.ok(kinds.includes('text-delta') && kinds.includes('error'), kinds.join());
  });
});
