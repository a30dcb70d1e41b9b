// Prompt-cache pricing, exact to the credit, on every path a cached prompt reaches citygate:
// Anthropic forwarded (Messages) and translated (Chat Completions through the AI SDK), OpenAI
// cached_tokens (Chat Completions passed through, Responses forwarded), Google cached content.
// Prices come from the catalog (genai-prices): Anthropic's cache writes at 1.25 × input (5-minute
// cache) and 2 × input (1-hour cache), reads at 0.1 × input. Also: no charge is ever negative,
// whatever an upstream reports, and a hold covers the dearest way the input can be billed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { costOf, worstCostOf, NOTHING_MEASURED, type Prices } from '../../src/kernel/metering.ts';
import { catalogEntry } from '../../src/services/ai/catalog/catalog.ts';
import { GEMINI_FLASH, GPT_4O_MINI, SONNET, startAgentsWorld, upstreamCalls, type AgentsWorld } from './agents-world.ts';

let w: AgentsWorld;
before(async () => {
  w = await startAgentsWorld();
});
after(() => w?.close());

// What the scripted upstream reports per call: 50 plain input, 200 + 100 written to the 5-minute
// and 1-hour caches, 1000 read from the cache, 12 output (OpenAI shapes: 1350 prompt, 1000 cached).
const SONNET_CALL = Math.ceil((50 * SONNET.input + 200 * SONNET.write5m + 100 * SONNET.write1h + 1000 * SONNET.read + 12 * SONNET.output) / 1e6);
const GPT_4O_MINI_CALL = Math.ceil((350 * GPT_4O_MINI.input + 1000 * GPT_4O_MINI.read + 12 * GPT_4O_MINI.output) / 1e6);

const fields = (r: any) => [r.input_tokens, r.cached_tokens, r.cache_write_tokens, r.cache_write_1h_tokens, r.output_tokens, r.credits];

describe('the catalog', () => {
  test('Anthropic models carry cache-write prices (5-minute 1.25 ×, 1-hour 2 × input) beside cache reads (0.1 ×)', () => {
    const p = catalogEntry('claude-sonnet-4-5', 'anthropic')!.prices;
    assert.deepEqual(p, { input_per_mtok: SONNET.input, output_per_mtok: SONNET.output, cached_per_mtok: SONNET.read, cache_write_per_mtok: SONNET.write5m, cache_write_1h_per_mtok: SONNET.write1h });
    assert.equal(p.cache_write_per_mtok, p.input_per_mtok! * 1.25);
    assert.equal(p.cache_write_1h_per_mtok, p.input_per_mtok! * 2);
  });
});

describe('Anthropic', () => {
  test('forwarded (Messages, plain and streamed): cache_creation_input_tokens at the write prices, 1-hour share apart; reads at the read price', async () => {
    const t = await w.user('anthropic-fwd');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const sdk = new Anthropic({ baseURL: `${w.gw.url}/v1/ai`, authToken: t, maxRetries: 0 });
    const m = await sdk.messages.create({ model: 'fwd-sonnet', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    assert.deepEqual([m.usage.input_tokens, m.usage.cache_creation_input_tokens, m.usage.cache_read_input_tokens], [50, 300, 1000], 'the upstream usage relayed as is');
    await sdk.messages.stream({ model: 'fwd-sonnet', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
    const records = await w.settled(t, b0, c0);
    assert.deepEqual(records.map(fields), [
      [1350, 1000, 300, 100, 12, SONNET_CALL],
      [1350, 1000, 300, 100, 12, SONNET_CALL],
    ]);
    assert.equal(SONNET_CALL, 1980);
  });

  test('translated (Chat Completions through the AI SDK): the same usage, the same charge', async () => {
    const t = await w.user('anthropic-sdk');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const openai = new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: t, maxRetries: 0 });
    const c = await openai.chat.completions.create({ model: 'fwd-sonnet', messages: [{ role: 'user', content: 'hi' }] });
    assert.deepEqual([c.usage!.prompt_tokens, c.usage!.prompt_tokens_details!.cached_tokens], [1350, 1000]);
    const s = await openai.chat.completions.create({ model: 'fwd-sonnet', messages: [{ role: 'user', content: 'hi' }], stream: true });
    for await (const _ of s) {
      /* drain */
    }
    const records = await w.settled(t, b0, c0);
    assert.deepEqual(records.map(fields), [
      [1350, 1000, 300, 100, 12, SONNET_CALL],
      [1350, 1000, 300, 100, 12, SONNET_CALL],
    ]);
  });
});

describe('OpenAI cached_tokens', () => {
  test('Chat Completions passed through, and the Responses API translated onto it: cached prompt tokens at the cached price', async () => {
    const t = await w.user('openai-chat');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const openai = new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: t, maxRetries: 0 });
    await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    await openai.responses.create({ model: 'gpt-4o-mini', input: 'hi' });
    const records = await w.settled(t, b0, c0);
    assert.deepEqual(records.map(fields), [
      [1350, 1000, 0, 0, 12, GPT_4O_MINI_CALL],
      [1350, 1000, 0, 0, 12, GPT_4O_MINI_CALL],
    ]);
  });

  test('the Responses API forwarded to OpenAI: input_tokens_details.cached_tokens at the cached price', async () => {
    const t = await w.user('openai-resp');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const openai = new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: t, maxRetries: 0 });
    await openai.responses.create({ model: 'gpt-4.1-mini', input: 'hi' });
    const [r] = await w.settled(t, b0, c0);
    assert.deepEqual(fields(r), [1350, 1000, 0, 0, 12, Math.ceil((350 * 400_000 + 1000 * 100_000 + 12 * 1_600_000) / 1e6)]);
  });
});

describe('Google cached content', () => {
  test('cachedContentTokenCount at the cached price', async () => {
    const t = await w.user('google');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const openai = new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: t, maxRetries: 0 });
    await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'one two three four' }] });
    const [r] = await w.settled(t, b0, c0);
    assert.equal(r.cached_tokens, 3);
    assert.equal(r.credits, Math.ceil(((r.input_tokens - 3) * GEMINI_FLASH.input + 3 * GEMINI_FLASH.read + r.output_tokens * GEMINI_FLASH.output) / 1e6));
  });
});

describe('the formula', () => {
  const p: Prices = { input_per_mtok: SONNET.input, output_per_mtok: SONNET.output, cached_per_mtok: SONNET.read, cache_write_per_mtok: SONNET.write5m, cache_write_1h_per_mtok: SONNET.write1h };
  const m = (o: Partial<typeof NOTHING_MEASURED>) => ({ ...NOTHING_MEASURED, ...o });

  test('never negative, whatever the upstream reports (parts above the total, a 1-hour share above the writes)', () => {
    assert.equal(costOf(p, m({ input_tokens: 10, cached_tokens: 1000 })), Math.ceil((1000 * SONNET.read) / 1e6));
    assert.equal(costOf(p, m({ input_tokens: 0, cache_write_tokens: 100, cache_write_1h_tokens: 500 })), Math.ceil((100 * SONNET.write1h) / 1e6));
    assert.equal(costOf(p, m({})), 0);
    for (let i = 0; i < 500; i++) {
      const r = (n: number) => Math.floor(Math.random() * n);
      assert.ok(costOf(p, m({ input_tokens: r(1e4), cached_tokens: r(1e4), cache_write_tokens: r(1e4), cache_write_1h_tokens: r(1e4), output_tokens: r(1e4) })) >= 0);
    }
  });

  test('without write prices (a MODEL_PRICES entry of input and output only) cache writes cost the input price', () => {
    assert.equal(costOf({ input_per_mtok: 1_000_000 }, m({ input_tokens: 300, cache_write_tokens: 200, cache_write_1h_tokens: 100 })), 300);
  });

  test('a hold covers the dearest split of the input: all of it written to the 1-hour cache', () => {
    const worst = m({ input_tokens: 1000, output_tokens: 100 });
    const hold = worstCostOf(p, worst);
    assert.equal(hold, Math.ceil((1000 * SONNET.write1h + 100 * SONNET.output) / 1e6));
    for (const split of [{}, { cached_tokens: 1000 }, { cache_write_tokens: 1000 }, { cache_write_tokens: 1000, cache_write_1h_tokens: 1000 }, { cached_tokens: 400, cache_write_tokens: 600, cache_write_1h_tokens: 300 }]) {
      assert.ok(costOf(p, m({ ...worst, ...split })) <= hold, JSON.stringify(split));
    }
    assert.equal(worstCostOf({ input_per_mtok: 5_000_000 }, worst), costOf({ input_per_mtok: 5_000_000 }, worst), 'without cache prices the hold is as before');
  });
});
