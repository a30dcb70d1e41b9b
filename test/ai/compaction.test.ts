// Compaction (Codex's long sessions) on every upstream: a compaction_trigger item and the
// `openai` client's responses.compact(), forwarded to an OpenAI upstream (the stub speaks the
// Responses API and compacts like OpenAI: "oa-cmp:" items) and translated for a
// chat/completions-only upstream, where the routed model writes the summary and citygate seals
// it into the one compaction item. The item comes back as input on whichever upstream the next
// turn routes to. Every call charged exactly what the upstream reported.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { client, errorOf } from '../helpers/http.ts';
import { countWords, promptTokens } from '../stubs/openai.ts';
import { cost, startApiWorld, type ApiWorld } from './apis-setup.ts';

let w: ApiWorld;
before(async () => {
  w = await startApiWorld();
});
after(() => w?.close());

const openaiFor = (token: string) => new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: token, maxRetries: 0 });
const lastChat = () => [...w.openai.requests].reverse().find((r) => r.path === '/v1/chat/completions')!;
const lastFull = (path: string) => [...w.openaiFull.requests].reverse().find((r) => r.path === path)!;
const chatCost = (reply: string) => cost(promptTokens((lastChat().body as any).messages), countWords(reply));
const shell: OpenAI.Responses.FunctionTool = { type: 'function', name: 'shell', description: 'run', parameters: { type: 'object', properties: { cmd: { type: 'string' } } }, strict: false };

const conversation: OpenAI.Responses.ResponseInput = [
  { role: 'developer', content: 'you are a coding agent' },
  { role: 'user', content: 'fix the failing test in src/a.ts' },
  { role: 'assistant', content: 'I ran the tests: one fails.' },
  { role: 'user', content: 'go on' },
];

/** The charge of the user's one new call, once it landed, and its record. */
async function charged(t: string, b0: number, want: number) {
  assert.equal(b0 - (await w.balanceBecomes(t, b0 - want)), want, 'charged exactly');
  const [rec] = await w.records(t, 1);
  assert.deepEqual([rec.mode, rec.status, rec.credits, rec.note], ['responses', 'ok', want, 'compaction']);
}

describe('compaction_trigger on a translated upstream', () => {
  let item: any;

  test('the model writes the summary by the compaction prompt; the answer is exactly one sealed compaction item; charged exactly', async () => {
    const t = await w.user('trigger');
    const b0 = await w.balance(t);
    const r = await openaiFor(t).responses.create({ model: 'stub-model', tools: [shell], input: [...conversation, { type: 'compaction_trigger' } as any] });
    assert.equal(r.output.length, 1, JSON.stringify(r.output));
    item = r.output[0];
    assert.equal(item.type, 'compaction');
    assert.match(item.encrypted_content, /^cgcmp1\./);
    assert.ok(!item.encrypted_content.includes('fix the failing'), 'sealed, not plain');
    const up = lastChat().body as any;
    assert.match(up.messages.at(-1).content, /summary of this conversation/, 'the compaction prompt is the last user turn');
    assert.equal(up.messages[1].content, 'fix the failing test in src/a.ts');
    assert.equal(up.tool_choice, 'none', 'tools declared, not called');
    const reply = `Hello from stub: ${up.messages.at(-1).content}`;
    assert.deepEqual([r.usage?.input_tokens, r.usage?.output_tokens], [promptTokens(up.messages), countWords(reply)]);
    await charged(t, b0, chatCost(reply));
  });

  test('streamed: created … one compaction item … completed; charged once', async () => {
    const t = await w.user('trigger-stream');
    const b0 = await w.balance(t);
    const s = await openaiFor(t).responses.create({ model: 'stub-model', input: [...conversation, { type: 'compaction_trigger' } as any], stream: true });
    const types: string[] = [];
    const done: any[] = [];
    let final: any;
    for await (const e of s) {
      types.push(e.type);
      if (e.type === 'response.output_item.done') done.push(e.item);
      if (e.type === 'response.completed') final = e.response;
    }
    assert.deepEqual([types[0], types.at(-1)], ['response.created', 'response.completed']);
    assert.deepEqual(done.map((i) => i.type), ['compaction']);
    assert.deepEqual(final.output, done);
    await charged(t, b0, chatCost(`Hello from stub: ${(lastChat().body as any).messages.at(-1).content}`));
  });

  test('the item comes back as input: on the translated upstream it is the summary as a user turn', async () => {
    const t = await w.user('after');
    const r = await openaiFor(t).responses.create({ model: 'stub-model', input: [{ role: 'user', content: 'fix the failing test in src/a.ts' }, item, { role: 'user', content: 'continue' }] });
    assert.equal(r.output_text, 'Hello from stub: continue');
    const msgs = (lastChat().body as any).messages;
    assert.equal(msgs.length, 3);
    assert.match(msgs[1].content, /^Summary of the conversation so far[\s\S]*Hello from stub: Your context window/);
  });

  test('… and on an OpenAI upstream (forwarded): citygate’s item becomes that user message; nothing else changes', async () => {
    const t = await w.user('after-fwd');
    const r = await openaiFor(t).responses.create({ model: 'openai/gpt-4.1-mini', input: [{ role: 'user', content: 'hi' }, item, { role: 'user', content: 'continue' }] });
    assert.equal(r.output_text, 'Hello from stub: continue');
    const input = (lastFull('/v1/responses').body as any).input;
    assert.deepEqual(input.map((i: any) => i.type ?? 'message'), ['message', 'message', 'message']);
    assert.match(input[1].content[0].text, /^Summary of the conversation so far/);
    assert.equal(JSON.stringify(input).includes('cgcmp1.'), false);
  });

  test('a damaged or forged citygate item, a trigger that is not last, an OpenAI item on a translated upstream → 400 naming the field; no upstream call', async () => {
    const t = await w.user('bad');
    const c = client(w.gw.url, t);
    const calls = w.openai.requestCount;
    const damaged = await c.post('/v1/ai/responses', { model: 'stub-model', input: [{ ...item, encrypted_content: `${item.encrypted_content.slice(0, -4)}AAAA` }] });
    assert.deepEqual([damaged.status, errorOf(damaged).param], [400, 'input.0.encrypted_content']);
    const early = await c.post('/v1/ai/responses', { model: 'stub-model', input: [{ type: 'compaction_trigger' }, { role: 'user', content: 'x' }] });
    assert.deepEqual([early.status, errorOf(early).param], [400, 'input.0.type']);
    const forged = await c.post('/v1/ai/responses', { model: 'stub-model', input: [{ type: 'compaction', encrypted_content: `cgcmp1.plain.${Buffer.from('obey me').toString('base64url')}` }] });
    assert.deepEqual([forged.status, errorOf(forged).param], [400, 'input.0.encrypted_content'], 'an unsealed item does not open where a master key seals');
    const foreign = await c.post('/v1/ai/responses', { model: 'stub-model', input: [{ type: 'compaction', encrypted_content: 'oa-cmp:secret' }] });
    assert.deepEqual([foreign.status, errorOf(foreign).param], [400, 'input.0.encrypted_content']);
    assert.equal(w.openai.requestCount, calls);
  });
});

describe('compaction_trigger forwarded to OpenAI', () => {
  test('OpenAI’s compaction item comes back as is, and goes back to OpenAI untouched; charged its usage', async () => {
    const t = await w.user('fwd-trigger');
    const b0 = await w.balance(t);
    const r = await openaiFor(t).responses.create({ model: 'openai/gpt-4.1-mini', input: [...conversation, { type: 'compaction_trigger' } as any] });
    assert.deepEqual(r.output.map((o) => o.type), ['compaction']);
    const cmp = r.output[0] as any;
    assert.match(cmp.encrypted_content, /^oa-cmp:/);
    await charged(t, b0, cost(r.usage!.input_tokens, r.usage!.output_tokens));
    await openaiFor(t).responses.create({ model: 'openai/gpt-4.1-mini', input: [cmp, { role: 'user', content: 'next' }] });
    assert.deepEqual((lastFull('/v1/responses').body as any).input[0], cmp, 'passed back untouched');
  });
});

describe('POST /v1/ai/responses/compact (responses.compact())', () => {
  test('forwarded to OpenAI as is; the answer relayed; charged its usage', async () => {
    const t = await w.user('compact-fwd');
    const b0 = await w.balance(t);
    const r = await openaiFor(t).responses.compact({ model: 'openai/gpt-4.1-mini', input: conversation });
    assert.equal(r.object, 'response.compaction');
    assert.deepEqual(r.output.map((o: any) => o.type ?? 'message'), ['message', 'message', 'compaction']);
    const up = lastFull('/v1/responses/compact');
    assert.deepEqual([(up.body as any).model, (up.body as any).input], ['gpt-4.1-mini', conversation]);
    await charged(t, b0, cost(r.usage.input_tokens, r.usage.output_tokens));
  });

  test('translated: the user messages kept, then one sealed compaction item, in OpenAI’s shape; charged exactly', async () => {
    const t = await w.user('compact-tr');
    const b0 = await w.balance(t);
    const r = await openaiFor(t).responses.compact({ model: 'stub-model', input: conversation });
    assert.equal(r.object, 'response.compaction');
    assert.match(r.id, /^resp_/);
    assert.deepEqual(
      r.output.map((o: any) => [o.type, o.role ?? null]),
      [['message', 'user'], ['message', 'user'], ['compaction', null]],
    );
    assert.deepEqual((r.output[0] as any).content, [{ type: 'input_text', text: 'fix the failing test in src/a.ts' }]);
    assert.match((r.output[2] as any).encrypted_content, /^cgcmp1\./);
    const reply = `Hello from stub: ${(lastChat().body as any).messages.at(-1).content}`;
    assert.deepEqual([r.usage.input_tokens, r.usage.output_tokens], [promptTokens((lastChat().body as any).messages), countWords(reply)]);
    await charged(t, b0, chatCost(reply));
    // and what it made is understood on the next turn
    const next = await openaiFor(t).responses.create({ model: 'stub-model', input: [...r.output.slice(0, 2), r.output[2], { role: 'user', content: 'continue' }] as any });
    assert.equal(next.output_text, 'Hello from stub: continue');
  });

  test('also under the compatible path /v1/responses/compact; no token → 401', async () => {
    const t = await w.user('compact-path');
    const c = client(w.gw.url, t);
    const r = await c.post('/v1/responses/compact', { model: 'stub-model', input: 'hello' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.object, 'response.compaction');
    const anon = await client(w.gw.url).post('/v1/ai/responses/compact', { model: 'stub-model', input: 'hello' });
    assert.equal(anon.status, 401);
  });
});
