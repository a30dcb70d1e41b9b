// POST /v1/ai/responses (the OpenAI Responses API, stateless) through the openai package and
// the AI SDK's OpenAI provider, on an OpenAI-compatible upstream that only serves
// chat/completions (translated) and on the Anthropic stub; charged once, exactly what the
// upstream reported.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, streamText, tool } from 'ai';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { client, errorOf } from '../helpers/http.ts';
import { countWords, promptTokens } from '../stubs/openai.ts';
import { cost, drain, startApiWorld, type ApiWorld } from './apis-setup.ts';

let w: ApiWorld;
before(async () => {
  w = await startApiWorld();
});
after(() => w?.close());

const openaiFor = (token: string) => new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: token, maxRetries: 0 });
const lastChat = () => [...w.openai.requests].reverse().find((r) => r.path === '/v1/chat/completions')!;
function chatUsage(replyText: string) {
  return { input: promptTokens((lastChat().body as any).messages), output: countWords(replyText) };
}
const weather: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: true,
};

describe('Responses API on a chat/completions-only upstream (translated)', () => {
  test('plain text input with instructions and max_output_tokens: output_text, usage, charged exactly', async () => {
    const t = await w.user('plain');
    const b0 = await w.balance(t);
    const r = await openaiFor(t).responses.create({ model: 'stub-model', instructions: 'be brief', input: 'hello there', max_output_tokens: 50 });
    assert.equal(r.output_text, 'Hello from stub: hello there');
    assert.equal(r.object, 'response');
    assert.equal(r.status, 'completed');
    const up = lastChat().body as any;
    assert.deepEqual(up.messages, [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello there' }]);
    assert.equal(up.max_tokens, 50);
    const u = chatUsage(r.output_text);
    assert.deepEqual([r.usage?.input_tokens, r.usage?.output_tokens, r.usage?.total_tokens], [u.input, u.output, u.input + u.output]);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - (cost(u.input, u.output)))), cost(u.input, u.output));
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.mode, rec.status, rec.model, rec.input_tokens, rec.output_tokens, rec.credits], ['responses', 'ok', 'stub-model', u.input, u.output, cost(u.input, u.output)]);
  });

  test('a message list (developer, user, assistant, user) reaches the upstream in order; max_output_tokens cut → incomplete', async () => {
    const t = await w.user('list');
    const r = await openaiFor(t).responses.create({
      model: 'stub-model',
      input: [
        { role: 'developer', content: 'rules here' },
        { role: 'user', content: [{ type: 'input_text', text: 'first question' }] },
        { role: 'assistant', content: 'first answer' },
        { type: 'message', role: 'user', content: 'second question is longer' },
      ],
      max_output_tokens: 3,
    });
    assert.deepEqual(
      (lastChat().body as any).messages.map((m: any) => [m.role, typeof m.content === 'string' ? m.content : m.content.map((p: any) => p.text).join('')]),
      [['system', 'rules here'], ['user', 'first question'], ['assistant', 'first answer'], ['user', 'second question is longer']],
    );
    assert.equal(r.output_text, 'Hello from stub:');
    assert.equal(r.status, 'incomplete');
    assert.equal(r.incomplete_details?.reason, 'max_output_tokens');
  });

  test('streamed: typed events from response.created to response.completed with usage; usage asked for upstream; charged once', async () => {
    const t = await w.user('stream');
    const b0 = await w.balance(t);
    const s = await openaiFor(t).responses.create({ model: 'stub-model', input: 'one two three four', stream: true });
    const types: string[] = [];
    const seqs: number[] = [];
    let deltas = '';
    let done: OpenAI.Responses.Response | undefined;
    for await (const e of s) {
      types.push(e.type);
      seqs.push(e.sequence_number);
      if (e.type === 'response.output_text.delta') deltas += e.delta;
      if (e.type === 'response.completed') done = e.response;
    }
    assert.equal(deltas, 'Hello from stub: one two three four');
    assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
    assert.equal(types.at(-1), 'response.completed');
    for (const ty of ['response.output_item.added', 'response.content_part.added', 'response.output_text.done', 'response.output_item.done']) assert.ok(types.includes(ty), ty);
    assert.deepEqual(seqs, seqs.map((_, i) => i), 'sequence numbers count up from 0');
    assert.deepEqual((lastChat().body as any).stream_options, { include_usage: true }, 'usage asked for');
    const u = chatUsage(deltas);
    assert.deepEqual([done?.usage?.input_tokens, done?.usage?.output_tokens, done?.output_text ?? done?.output[0]?.type], [u.input, u.output, 'message']);
    const want = b0 - cost(u.input, u.output);
    assert.equal(await w.balanceBecomes(t, want), want);
    const recs = await w.records(t, 1);
    assert.equal(recs.length, 1);
    assert.deepEqual([recs[0].mode, recs[0].input_tokens, recs[0].output_tokens, recs[0].credits], ['responses', u.input, u.output, cost(u.input, u.output)]);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await w.balance(t), want, 'charged once');
  });

  test('the client’s stream helper accepts the event sequence and assembles the final response', async () => {
    const t = await w.user('helper');
    const s = openaiFor(t).responses.stream({ model: 'stub-model', input: 'alpha beta' });
    let text = '';
    s.on('response.output_text.delta', (e) => (text += e.delta));
    const final = await s.finalResponse();
    assert.equal(text, 'Hello from stub: alpha beta');
    assert.equal(final.output_text, text);
  });

  test('a function-tool round trip, plain and streamed', async () => {
    const t = await w.user('tools');
    const oa = openaiFor(t);
    const first = await oa.responses.create({ model: 'stub-model', input: [{ role: 'user', content: 'Paris' }], tools: [weather] });
    const fc = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    assert.ok(fc, JSON.stringify(first.output));
    assert.deepEqual([fc.name, JSON.parse(fc.arguments)], ['get_weather', { city: 'Paris' }]);
    assert.equal((lastChat().body as any).tools[0].function.name, 'get_weather');
    const second = await oa.responses.create({
      model: 'stub-model',
      tools: [weather],
      input: [{ role: 'user', content: 'Paris' }, fc, { type: 'function_call_output', call_id: fc.call_id, output: 'sunny 21C' }],
    });
    assert.equal(second.output_text, 'Tool result received: sunny 21C');
    const upMsgs = (lastChat().body as any).messages;
    assert.deepEqual(upMsgs.map((m: any) => m.role), ['user', 'assistant', 'tool']);
    assert.equal(upMsgs[1].tool_calls[0].id, fc.call_id);
    assert.equal(upMsgs[2].tool_call_id, fc.call_id);

    const s = await oa.responses.create({ model: 'stub-model', input: 'Rome', tools: [weather], tool_choice: { type: 'function', name: 'get_weather' }, stream: true });
    let args = '';
    let item: any;
    for await (const e of s) {
      if (e.type === 'response.function_call_arguments.done') args = e.arguments;
      if (e.type === 'response.output_item.done' && e.item.type === 'function_call') item = e.item;
    }
    assert.deepEqual(JSON.parse(args), { city: 'Rome' });
    assert.equal(item.name, 'get_weather');
  });

  test('a custom-tool round trip (Codex’s free-form apply_patch), plain and streamed: the upstream gets a function with one string argument, the client a custom_tool_call', async () => {
    const t = await w.user('custom-tools');
    const oa = openaiFor(t);
    const b0 = await w.balance(t);
    const applyPatch: OpenAI.Responses.CustomTool = {
      type: 'custom',
      name: 'apply_patch',
      description: 'Edit files with a patch.',
      format: { type: 'grammar', syntax: 'lark', definition: 'start: "*** Begin Patch" LF body "*** End Patch"' },
    };
    const first = await oa.responses.create({ model: 'stub-model', input: [{ role: 'user', content: 'add hello.txt' }], tools: [applyPatch] });
    assert.deepEqual(first.output.map((o) => o.type), ['custom_tool_call']);
    const ctc = first.output[0] as OpenAI.Responses.ResponseCustomToolCall;
    assert.deepEqual([ctc.name, ctc.input], ['apply_patch', 'add hello.txt'], 'the free-form input as text, not JSON');
    assert.match(ctc.id!, /^ctc_/);
    const upTool = (lastChat().body as any).tools[0];
    assert.equal(upTool.function.name, 'apply_patch');
    assert.deepEqual(upTool.function.parameters.required, ['input']);
    assert.ok(upTool.function.parameters.properties.input.description.endsWith('lark grammar:\nstart: "*** Begin Patch" LF body "*** End Patch"'), 'the grammar, which the upstream cannot enforce, is told to the model');
    const charged = (u: OpenAI.Responses.ResponseUsage | null | undefined) => cost(u!.input_tokens, u!.output_tokens);
    let total = charged(first.usage);

    const second = await oa.responses.create({
      model: 'stub-model',
      tools: [applyPatch],
      input: [{ role: 'user', content: 'add hello.txt' }, ctc, { type: 'custom_tool_call_output', call_id: ctc.call_id, output: 'Done, 1 file' }],
    });
    assert.equal(second.output_text, 'Tool result received: Done, 1 file');
    const upMsgs = (lastChat().body as any).messages;
    assert.deepEqual(upMsgs.map((m: any) => m.role), ['user', 'assistant', 'tool']);
    assert.deepEqual(JSON.parse(upMsgs[1].tool_calls[0].function.arguments), { input: 'add hello.txt' });
    assert.equal(upMsgs[2].tool_call_id, ctc.call_id);
    total += charged(second.usage);

    const s = await oa.responses.create({ model: 'stub-model', input: 'Rome', tools: [applyPatch], tool_choice: { type: 'custom', name: 'apply_patch' }, stream: true });
    const types: string[] = [];
    let input = '';
    let item: any;
    for await (const e of s) {
      types.push(e.type);
      if (e.type === 'response.custom_tool_call_input.done') input = e.input;
      if (e.type === 'response.output_item.done') item = e.item;
      if (e.type === 'response.completed') total += charged(e.response.usage);
    }
    assert.equal(input, 'Rome');
    assert.deepEqual([item.type, item.name, item.input], ['custom_tool_call', 'apply_patch', 'Rome']);
    assert.deepEqual(types.filter((x) => x.includes('tool_call') || x.includes('arguments')), ['response.custom_tool_call_input.delta', 'response.custom_tool_call_input.done']);
    assert.ok(total > 0);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - total)), total, 'each of the 3 calls charged once, by its usage');
  });

  test('the AI SDK’s OpenAI provider (which speaks the Responses API) against citygate, with a tool', async () => {
    const t = await w.user('aisdk');
    const oa = createOpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: t });
    const r = await generateText({ model: oa.responses('stub-model'), prompt: 'gamma delta', maxRetries: 0 });
    assert.equal(r.text, 'Hello from stub: gamma delta');
    const s = streamText({ model: oa.responses('stub-model'), prompt: 'epsilon', maxRetries: 0 });
    assert.equal(await s.text, 'Hello from stub: epsilon');
    assert.ok(((await s.usage).inputTokens ?? 0) > 0);
    const withTool = await generateText({
      model: oa.responses('stub-model'),
      prompt: 'Oslo',
      tools: { get_weather: tool({ inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }) }) },
      maxRetries: 0,
    });
    assert.deepEqual(withTool.toolCalls.map((c) => [c.toolName, c.input]), [['get_weather', { city: 'Oslo' }]]);
  });

  test('on an Anthropic upstream too (translated through the AI SDK)', async () => {
    const t = await w.user('claude');
    const b0 = await w.balance(t);
    const r = await openaiFor(t).responses.create({ model: 'claude', input: 'hi there', instructions: 'sys' });
    assert.equal(r.output_text, 'Hello from anthropic stub: hi there');
    assert.deepEqual([r.usage?.input_tokens, r.usage?.output_tokens], [1 + 3 + 2, 6]);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - (cost(6, 6)))), cost(6, 6));
  });
});

describe('Responses API on an upstream that speaks it (forwarded)', () => {
  const lastResp = () => [...w.openaiFull.requests].reverse().find((r) => r.path === '/v1/responses')!;

  test('plain: the upstream response as is, store: false upstream, charged its usage', async () => {
    const t = await w.user('pass');
    const b0 = await w.balance(t);
    const r = await openaiFor(t).responses.create({ model: 'openai/gpt-4.1-mini', instructions: 'sys', input: 'hello there' });
    assert.equal(r.output_text, 'Hello from stub: hello there');
    assert.match(r.id, /^resp_stub/, 'the upstream’s own response');
    const up = lastResp();
    assert.deepEqual([(up.body as any).model, (up.body as any).store, up.headers.authorization], ['gpt-4.1-mini', false, 'Bearer sk-stub']);
    const [i, o] = [r.usage!.input_tokens, r.usage!.output_tokens];
    assert.deepEqual([i, o], [1 + 3 + 2 + 3, 5]);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - (cost(i, o)))), cost(i, o));
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.mode, rec.model, rec.credits], ['responses', 'openai/gpt-4.1-mini', cost(i, o)]);
  });

  test('streamed: the upstream events relayed; charged once by response.completed usage', async () => {
    const t = await w.user('pass-stream');
    const b0 = await w.balance(t);
    const s = openaiFor(t).responses.stream({ model: 'openai/gpt-4.1-mini', input: 'one two three' });
    let text = '';
    s.on('response.output_text.delta', (e) => (text += e.delta));
    const final = await s.finalResponse();
    assert.equal(text, 'Hello from stub: one two three');
    assert.equal((lastResp().body as any).stream, true);
    const want = b0 - cost(final.usage!.input_tokens, final.usage!.output_tokens);
    assert.equal(await w.balanceBecomes(t, want), want);
    assert.equal((await w.records(t, 1)).length, 1);
  });
});

describe('Responses API: stateless, credentials and money', () => {
  test('previous_response_id and store: true → 400 naming the field; no upstream call', async () => {
    const t = await w.user('state');
    const calls = w.openai.requestCount;
    const prev = await client(w.gw.url, t).post('/v1/ai/responses', { model: 'stub-model', input: 'x', previous_response_id: 'resp_123' });
    assert.deepEqual([prev.status, errorOf(prev).param], [400, 'previous_response_id']);
    assert.match(errorOf(prev).message, /keeps no responses/);
    const store = await client(w.gw.url, t).post('/v1/ai/responses', { model: 'stub-model', input: 'x', store: true });
    assert.deepEqual([store.status, errorOf(store).param], [400, 'store']);
    assert.equal((await client(w.gw.url, t).post('/v1/ai/responses', { model: 'stub-model', input: 'x', store: false })).status, 200);
    assert.equal(w.openai.requestCount, calls + 1);
  });

  test('hosted tools on a translated upstream: left out by default (header, usage note); AI_HOSTED_TOOLS=reject → 400 naming the tool', async () => {
    const t = await w.user('hosted');
    const calls = w.openai.requestCount;
    const body = { model: 'stub-model', input: 'x', tools: [{ type: 'web_search', external_web_access: false }, { type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }] };
    const ok = await client(w.gw.url, t).post('/v1/ai/responses', body);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.headers.get('x-citygate-dropped-tools'), 'web_search');
    assert.deepEqual(((w.openai.requests.at(-1)!.body as any).tools ?? []).map((x: any) => x.function?.name), ['f'], 'only the function tool went upstream');
    const [rec] = await w.records(t, 1);
    assert.equal(rec.note, 'hosted tools dropped: web_search');
    assert.equal((await w.admin.post('/v1/env/upsert', { key: 'AI_HOSTED_TOOLS', value: 'reject' })).status, 200);
    try {
      const hosted = await client(w.gw.url, t).post('/v1/ai/responses', body);
      assert.deepEqual([hosted.status, errorOf(hosted).param], [400, 'tools.0.type']);
      assert.match(errorOf(hosted).message, /web_search/);
    } finally {
      await w.admin.post('/v1/env/remove', { key: 'AI_HOSTED_TOOLS' });
    }
    assert.equal(w.openai.requestCount, calls + 1);
  });

  test('translated, a tool output without its call or a call without its output → 400 naming the item (as OpenAI); no upstream call', async () => {
    const t = await w.user('orphans');
    const c = client(w.gw.url, t);
    const calls = w.openai.requestCount;
    const call = { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}' };
    const orphan = await c.post('/v1/ai/responses', { model: 'stub-model', tools: [weather], input: [{ role: 'user', content: 'x' }, { type: 'function_call_output', call_id: 'call_9', output: 'y' }] });
    assert.deepEqual([orphan.status, errorOf(orphan).param], [400, 'input.1.call_id']);
    const unanswered = await c.post('/v1/ai/responses', { model: 'stub-model', tools: [weather], input: [{ role: 'user', content: 'x' }, call, { role: 'user', content: 'and?' }] });
    assert.deepEqual([unanswered.status, errorOf(unanswered).param], [400, 'input.1.call_id']);
    assert.equal(w.openai.requestCount, calls);
  });

  test('a bad token → 401 in the OpenAI error shape', async () => {
    await assert.rejects(openaiFor('nope').responses.create({ model: 'stub-model', input: 'x' }), (e: unknown) => {
      assert.ok(e instanceof OpenAI.AuthenticationError);
      assert.equal((e as any).error.code, 'invalid_token');
      return true;
    });
  });

  test('no credits → 402 before any upstream call, plain and streamed', async () => {
    const t = await w.user('broke');
    await drain(w, t);
    const calls = [w.openai.requestCount, w.anthropic.messageCalls];
    for (const model of ['stub-model', 'claude']) {
      for (const stream of [false, true]) {
        await assert.rejects(openaiFor(t).responses.create({ model, input: 'x', stream } as any), (e: unknown) => {
          assert.equal((e as any).status, 402);
          assert.equal((e as any).error.code, 'insufficient_credits');
          return true;
        });
      }
    }
    assert.deepEqual([w.openai.requestCount, w.anthropic.messageCalls], calls, 'no upstream call');
  });

  test('a foreign city_id → 403', async () => {
    const t = await w.user('city');
    const r = await client(w.gw.url, t).post('/v1/ai/responses', { model: 'stub-model', input: 'x', city_id: 'elsewhere' });
    assert.deepEqual([r.status, errorOf(r).code], [403, 'city_mismatch']);
  });
});
