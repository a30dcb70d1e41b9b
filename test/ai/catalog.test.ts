// The price catalog (issue 13): stock and upstream-named models are priced from
// @pydantic/genai-prices without MODEL_PRICES, MODEL_PRICES still overrides, the admin catalog
// shows price and source, and a request without max_tokens holds the model's maximum output
// tokens from the catalog (models.dev data), not a fixed 8192.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { tokenFor } from './setup.ts';
import { until } from '../helpers/wait.ts';

let stub: OpenAIStub;
let gw: TestGateway;
let admin: ReturnType<typeof client>;

before(async () => {
  stub = await startOpenAIStub();
  gw = await startGateway({ env: { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, BALANCE_INITIAL_CREDITS: '500000', USAGE_FLUSH_MS: '20' } });
  admin = client(gw.url, gw.adminKey);
  const r = await admin.post('/v1/ai/upstreams/create', { name: 'stub', kind: 'openai-compatible', base_url: stub.url, api_key: 'sk-stub', models: ['gpt-5', 'stub-model'] });
  assert.equal(r.status, 200, r.text);
});
after(async () => {
  await gw?.stop();
  await stub?.close();
});

const entry = async (id: string) => (await admin.get('/v1/ai/models')).body.items.find((m: any) => m.id === id);

test('the admin catalog shows catalog prices for well-known models, and where each price comes from', async () => {
  const mini = await entry('gpt-4o-mini'); // the text provider slot's default model
  assert.deepEqual([mini.price, mini.price_source], [{ input_per_mtok: 150_000, output_per_mtok: 600_000, cached_per_mtok: 75_000 }, 'catalog']);
  const gpt5 = await entry('gpt-5'); // only an upstream names it
  assert.deepEqual([gpt5.price.input_per_mtok, gpt5.price.output_per_mtok, gpt5.price_source], [1_250_000, 10_000_000, 'catalog']);
  assert.deepEqual((await entry('anthropic/claude-sonnet-4-5')).price_source, 'catalog');
  assert.deepEqual((await entry('openai/gpt-image-1')).price_source, 'registry');
  const unknown = await entry('stub-model');
  assert.deepEqual([unknown.price, unknown.price_source], [null, null]);
  // MODEL_PRICES still overrides
  await admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'gpt-4o-mini': { input_per_mtok: 1 }, 'stub-model': { per_request: 5 } }) });
  assert.deepEqual([(await entry('gpt-4o-mini')).price, (await entry('gpt-4o-mini')).price_source], [{ input_per_mtok: 1 }, 'MODEL_PRICES']);
  assert.equal((await entry('stub-model')).price_source, 'MODEL_PRICES');
  await admin.post('/v1/env/remove', { key: 'MODEL_PRICES' });
});

test('no max_tokens: the hold uses the catalog maximum output tokens (gpt-5: 128000 × 10 credits), not 8192', async () => {
  const user = client(gw.url, await tokenFor(admin, 'cat-city', 'cathy')); // 500,000 credits
  const msg = { model: 'gpt-5', messages: [{ role: 'user', content: 'hello there' }] };
  // 8192 × 10 = 81,920 credits would fit; 128,000 × 10 = 1,280,000 does not
  const r = await user.post('/v1/ai/chat/completions', msg);
  assert.equal(r.status, 402, r.text);
  assert.equal(errorOf(r).code, 'insufficient_credits');
  const ok = await user.post('/v1/ai/chat/completions', { ...msg, max_tokens: 1000 });
  assert.equal(ok.status, 200, ok.text);
  const u = ok.body.usage;
  const cost = Math.ceil(u.prompt_tokens * 1.25 + u.completion_tokens * 10);
  // The settle lands just after the answer (on PostgreSQL a few ms later): wait for the hold to close.
  const b = await until('the hold settled', async () => {
    const c = (await user.get('/v1/balance/me')).body.credits;
    return c === 500_000 - cost ? c : null;
  }, 15_000).catch(async () => (await user.get('/v1/balance/me')).body.credits);
  assert.equal(500_000 - b, cost, 'charged at the catalog price');
});
