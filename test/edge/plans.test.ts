// Plans on the edge (issue 34): the stock Worker in workerd with a local D1. A Worker has no
// graceful stop, so the windows engine takes exactly each call's hold and returns the rest
// right after the call: still exact under a race. Black-box over HTTP.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, client, errorOf } from '../helpers/http.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

let stub: OpenAIStub;
let w: TestWorker;
before(async () => {
  stub = await startOpenAIStub();
  w = await startWorker({
    vars: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model',
      MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 100 } }),
    },
  });
  assert.equal((await call(w.url, 'GET', '/health')).status, 200, w.logs());
});
after(async () => {
  await w?.stop();
  await stub?.close();
});

test('a plan with 5 h = 300 on D1: 12 racing calls, exactly 3 served, the rest 429 naming the window; plans/me counts exactly what was used', async () => {
  const admin = client(w.url, await w.adminKey());
  assert.equal((await admin.post('/v1/cities/create', { name: 'edge-plans', city_id: 'edge-plans' })).status, 200);
  const p = await admin.post('/v1/plans/create', { city_id: 'edge-plans', name: 'Pro', interval: 'month', price: { amount: 2000, currency: 'usd' }, credits: 10_000, windows: [{ window: '5h', limit: 300 }], overflow: false });
  assert.equal(p.status, 200, p.text);
  assert.equal((await admin.post('/v1/plans/assign', { city_id: 'edge-plans', user_id: 'u', plan_id: p.body.plan.id })).status, 200);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'edge-plans', user_id: 'u' })).body.user_token as string;
  const rs = await Promise.all(Array.from({ length: 12 }, (_, i) => call(w.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: `edge ${i}` }] } })));
  assert.equal(rs.filter((r) => r.status === 200).length, 3, rs.map((r) => r.status).join(','));
  for (const r of rs.filter((x) => x.status !== 200)) {
    assert.equal(r.status, 429, r.text);
    assert.equal(errorOf(r).param, 'window:5h');
  }
  const me = client(w.url, token);
  await until('the calls’ rests returned', async () => (await me.get('/v1/plans/me')).body.subscription.windows[0].used === 300, 10_000);
  assert.equal((await me.get('/v1/balance/me')).body.credits, 0, 'nothing charged to credits');
});
