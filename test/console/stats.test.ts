// The read-only admin actions the console reads: usage/stats (calls, tokens, credits, errors
// and citygate's p50/p99 overhead per day, city and model) and balance/get.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { bucketOf, OVERHEAD_EDGES } from '../../src/services/usage/rollup.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

let stub: OpenAIStub;
let gw: TestGateway;
let admin: ReturnType<typeof client>;
let bureau: ReturnType<typeof client>;
const today = new Date().toISOString().slice(0, 10);
const overheads: Record<string, number[]> = { 'city-a': [], 'city-b': [] };

before(async () => {
  stub = await startOpenAIStub();
  gw = await startGateway({
    env: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model,stub-500',
      MODEL_PRICES: JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 1_000_000 } }),
      BALANCE_INITIAL_CREDITS: '1000000',
      USAGE_FLUSH_MS: '10',
    },
  });
  admin = client(gw.url, gw.adminKey);
  for (const c of ['city-a', 'city-b']) await admin.post('/v1/cities/create', { name: c, city_id: c });
  bureau = client(gw.url, (await admin.post('/v1/bureaus/create', { city_id: 'city-a', name: 'a' })).body.bureau_token);
  // city-a: 5 ok calls (one streamed) and 1 upstream error; city-b: 2 ok calls.
  const calls: [string, string, boolean][] = [
    ['city-a', 'stub-model', false], ['city-a', 'stub-model', false], ['city-a', 'stub-model', true], ['city-a', 'stub-model', false],
    ['city-a', 'stub-model', false], ['city-a', 'stub-500', false], ['city-b', 'stub-model', false], ['city-b', 'stub-model', false],
  ];
  for (const [city, model, stream] of calls) {
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: city, user_id: 'u1' })).body.user_token;
    const res = await fetch(`${gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'one two three' }] }),
    });
    await res.text();
    overheads[city].push(Number(res.headers.get('x-citygate-overhead-ms')));
  }
  await until('8 usage records', async () => (await admin.get('/v1/usage/list?limit=50')).body.items.length === 8);
});
after(async () => {
  await gw?.stop();
  await stub?.close();
});

const nearestRank = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.ceil((p / 100) * xs.length) - 1];

/** A percentile read from the rollup's histogram: the upper edge of the exact value's bucket, at most the largest value. */
function nearBucket(got: number, exact: number, max: number) {
  assert.equal(got, Math.min(OVERHEAD_EDGES[bucketOf(exact)] ?? max, max), `p ${got} ms vs exact ${exact} ms`);
}

/** The overhead_ms of the usage records of a city. */
const recorded: Record<string, number[]> = {};

test('each usage record keeps the overhead its response reported, JSON or stream (the record is written once the answer is ready)', async () => {
  for (const city of ['city-a', 'city-b']) {
    const items = (await admin.get(`/v1/usage/list?city_id=${city}`)).body.items.reverse();
    recorded[city] = items.map((u: { overhead_ms: number }) => u.overhead_ms);
    assert.equal(recorded[city].length, overheads[city].length);
    // the header is printed with toFixed(2), the record rounded to 0.01: the same figure, up to that rounding
    recorded[city].forEach((v, i) => assert.ok(v > 0 && Math.abs(v - overheads[city][i]) <= 0.011, `record ${v} ms vs header ${overheads[city][i]} ms`));
  }
});

test('usage/stats per city: exact totals from the rollup, p50/p99 overhead from its histogram (within one bucket)', async () => {
  const r = await admin.get(`/v1/usage/stats?group=city&from=${today}&to=${today}`);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.group, ['city']);
  const a = r.body.items.find((i: { city_id: string }) => i.city_id === 'city-a');
  const b = r.body.items.find((i: { city_id: string }) => i.city_id === 'city-b');
  assert.equal(a.calls, 6);
  assert.equal(a.errors, 1);
  // 'one two three' = 3 + 3 = 6 prompt tokens; the reply "Hello from stub: one two three" = 6 tokens.
  assert.equal(a.input_tokens, 5 * 6);
  assert.equal(a.output_tokens, 5 * 6);
  assert.equal(a.credits, 5 * 12);
  assert.equal(b.calls, 2);
  nearBucket(a.overhead_p50_ms, nearestRank(recorded['city-a'], 50), Math.max(...recorded['city-a']));
  nearBucket(a.overhead_p99_ms, nearestRank(recorded['city-a'], 99), Math.max(...recorded['city-a']));
  assert.equal(b.overhead_p99_ms, Math.max(...recorded['city-b']));
  assert.equal(r.body.totals.calls, 8);
  const all = [...recorded['city-a'], ...recorded['city-b']];
  nearBucket(r.body.totals.overhead_p50_ms, nearestRank(all, 50), Math.max(...all));
  assert.deepEqual(r.body.overhead_sample, { records: 8, complete: true });
  assert.equal('model' in a, false);
});

test('usage/stats groups by day × model, filters by model, and answers totals only for group=""', async () => {
  const r = await admin.get(`/v1/usage/stats?group=day,model&model=stub-model`);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.items.map((i: object) => Object.keys(i).slice(0, 2)), [['day', 'model']]);
  assert.equal(r.body.items[0].day, today);
  assert.equal(r.body.items[0].calls, 7);
  const t = await admin.get(`/v1/usage/stats?group=`);
  assert.deepEqual(t.body.items.length, 1);
  assert.equal(t.body.totals.calls, 8);
});

test('a bureau gets its own city only; another city is refused', async () => {
  const r = await bureau.get('/v1/usage/stats?group=city');
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.items.map((i: { city_id: string }) => i.city_id), ['city-a']);
  assert.equal(r.body.totals.calls, 6);
  const other = await bureau.get('/v1/usage/stats?city_id=city-b');
  assert.equal(other.status, 403);
  assert.equal(other.body.error.code, 'city_mismatch');
  const user = await client(gw.url, (await admin.post('/v1/cities/tokens/apply', { city_id: 'city-a', user_id: 'u1' })).body.user_token).get('/v1/usage/stats');
  assert.equal(user.status, 403);
});

test('usage/stats refuses bad input with a 400 naming the field', async () => {
  for (const [q, param] of [['group=city,week', 'group'], ['from=2026-02-01&to=2026-01-01', 'from'], ['from=2020-01-01&to=2026-01-01', 'from'], ['from=yesterday', 'from']]) {
    const r = await admin.get(`/v1/usage/stats?${q}`);
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error.param, param, q);
  }
});

test('balance/get reads one balance without opening it', async () => {
  const r = await admin.get('/v1/balance/get?city_id=city-a&user_id=u1');
  assert.equal(r.status, 200);
  assert.equal(r.body.credits, 1_000_000 - 5 * 12);
  assert.equal(r.body.exists, true);
  const nobody = await admin.get('/v1/balance/get?city_id=city-a&user_id=nobody');
  assert.deepEqual([nobody.body.credits, nobody.body.exists], [1_000_000, false]);
  const list = await admin.get('/v1/balance/list?city_id=city-a');
  assert.ok(!list.body.items.some((b: { user_id: string }) => b.user_id === 'nobody'), 'reading did not open a balance');
  assert.equal((await bureau.get('/v1/balance/get?city_id=city-b&user_id=u1')).status, 403);
  assert.equal((await admin.get('/v1/balance/get?city_id=city-a')).status, 400);
});
