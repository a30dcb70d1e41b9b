// Proves the Anthropic stub speaks the Messages API: the real @anthropic-ai/sdk talks to it.
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startAnthropicStub, type AnthropicStub } from './anthropic.ts';

let stub: AnthropicStub;
let client: Anthropic;
before(async () => {
  stub = await startAnthropicStub();
  client = new Anthropic({ baseURL: stub.origin, apiKey: stub.apiKey, maxRetries: 0 });
});
after(() => stub.close());

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

describe('the Anthropic stub', () => {
  test('a plain message: text, usage by the documented formula, the key and anthropic-version sent', async () => {
    const m = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 100, system: 'be brief', messages: [{ role: 'user', content: 'hello there' }] });
    assert.deepEqual(m.content, [{ type: 'text', text: 'Hello from anthropic stub: hello there' }]);
    assert.equal(m.stop_reason, 'end_turn');
    assert.deepEqual([m.usage.input_tokens, m.usage.output_tokens], [2 + 3 + 2, 6]);
    const h = stub.requests.at(-1)!.headers;
    assert.equal(h['x-api-key'] ?? h.authorization, h['x-api-key'] ? stub.apiKey : `Bearer ${stub.apiKey}`);
    const viaHeader = await fetch(`${stub.url}/messages`, {
      method: 'POST',
      headers: { 'x-api-key': stub.apiKey, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    });
    assert.equal(viaHeader.status, 200);
    const noVersion = await fetch(`${stub.url}/messages`, { method: 'POST', headers: { 'x-api-key': stub.apiKey }, body: '{}' });
    assert.equal(noVersion.status, 400);
    assert.ok(h['anthropic-version']);
  });

  test('streamed: the SDK assembles the final message and usage from the events', async () => {
    const s = client.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 100, messages: [{ role: 'user', content: 'one two three' }] });
    let text = '';
    s.on('text', (t) => (text += t));
    const m = await s.finalMessage();
    assert.equal(text, 'Hello from anthropic stub: one two three');
    assert.equal((m.content[0] as Anthropic.TextBlock).text, text);
    assert.deepEqual([m.usage.input_tokens, m.usage.output_tokens, m.stop_reason], [6, 7, 'end_turn']);
  });

  test('tool use round trip, image block, stop_sequences and max_tokens', async () => {
    const tools: Anthropic.Tool[] = [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Paris' }];
    const first = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 100, tools, messages });
    const use = first.content[0] as Anthropic.ToolUseBlock;
    assert.equal(first.stop_reason, 'tool_use');
    assert.deepEqual([use.type, use.name, use.input], ['tool_use', 'get_weather', { city: 'Paris' }]);
    messages.push({ role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny 21C' }] });
    const second = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 100, tools, messages });
    assert.equal((second.content[0] as Anthropic.TextBlock).text, 'Tool result received: sunny 21C');
    const img = await client.messages.create({
      model: 'claude-sonnet-4-5',
      max_tokens: 100,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }, { type: 'text', text: 'what is it' }] }],
    });
    assert.equal((img.content[0] as Anthropic.TextBlock).text, 'Hello from anthropic stub: what is it [image: image/png]');
    assert.equal(img.usage.input_tokens, 3 + 3 + 100);
    const stop = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 100, stop_sequences: ['stub'], messages: [{ role: 'user', content: 'x' }] });
    assert.deepEqual([(stop.content[0] as Anthropic.TextBlock).text, stop.stop_reason, stop.stop_sequence], ['Hello from anthropic ', 'stop_sequence', 'stub']);
    const cut = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] });
    assert.deepEqual([(cut.content[0] as Anthropic.TextBlock).text, cut.stop_reason], ['Hello from', 'max_tokens']);
  });

  test('count_tokens, models, and errors in Anthropic’s shape', async () => {
    const c = await client.messages.countTokens({ model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'a b c' }] });
    assert.equal(c.input_tokens, 6);
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.ok(ids.includes('claude-sonnet-4-5'));
    const bad = new Anthropic({ baseURL: stub.origin, apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(bad.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => {
      assert.ok(e instanceof Anthropic.AuthenticationError);
      assert.deepEqual((e as any).error, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
      return true;
    });
    await assert.rejects(
      client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'nope', content: 'x' }] }] }),
      (e: unknown) => e instanceof Anthropic.BadRequestError,
    );
    await assert.rejects(client.messages.create({ model: 'claude-500', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof Anthropic.InternalServerError);
  });
});
