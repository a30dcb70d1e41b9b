// Plans' windows across processes (issue 34): two gateways on one database — two replicas on
// PostgreSQL in the PostgreSQL run, two processes on one SQLite file otherwise — serve one
// subscriber's 50 racing calls round-robin. The 5 h window (1,000) and the 7 d window (3,000)
// hold exactly across both: each race passes exactly 10 calls of 100 credits, and the fourth
// 5 h window finds the 7 d one full. The test clock (TEST_CLOCK_OFFSET_MS) moves both.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { PROJECT_CONFIG } from '../ai/setup.ts';
import { startGateways, tempDir } from '../helpers/gateway.ts';
import { call, client, errorOf } from '../helpers/http.ts';
import { row, until } from './setup.ts';
import { startOpenAIStub } from '../stubs/openai.ts';

test('two processes hold a subscriber’s 5 h and 7 d windows exactly', { timeout: 180_000 }, async (t) => {
  const stub = await startOpenAIStub();
  const dir = tempDir('citygate-plan-replicas-');
  writeFileSync(join(dir, 'citygate.config.ts'), PROJECT_CONFIG);
  const env = {
    TEXTPROVIDER_API_KEY: 'sk-stub',
    TEXTPROVIDER_BASE_URL: stub.url,
    TEXTPROVIDER_MODELS: 'stub-model',
    OPENAI_API_KEY: 'sk-stub',
    OPENAI_BASE_URL: stub.url,
    MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 100 } }),
    USAGE_FLUSH_MS: '20',
    BALANCE_FLUSH_MS: '20',
    CITYGATE_TEST_HOOKS: '1',
  };
  const gws = await startGateways(2, { dir, env }).catch(async (e) => {
    await stub.close();
    throw e;
  });
  try {
    const urls = gws.map((g) => g.url);
    const admin = client(urls[0], gws[0].adminKey);
    assert.equal((await admin.post('/v1/cities/create', { name: 'pr', city_id: 'pr' })).status, 200);
    const p = await admin.post('/v1/plans/create', { city_id: 'pr', name: 'Pro', interval: 'month', price: { amount: 2000, currency: 'usd' }, credits: 10_000, windows: [{ window: '5h', limit: 1000 }, { window: '7d', limit: 3000 }], overflow: false });
    assert.equal(p.status, 200, p.text);
    assert.equal((await admin.post('/v1/plans/assign', { city_id: 'pr', user_id: 'racer', plan_id: p.body.plan.id })).status, 200);
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'pr', user_id: 'racer' })).body.user_token as string;
    const sub = (await client(urls[0], token).get('/v1/plans/me')).body.subscription.id as string;
    const windowsOn = async (url: string) => Object.fromEntries((await client(url, token).get('/v1/plans/me')).body.subscription.windows.map((x: { name: string; used: number }) => [x.name, x.used]));
    const counted = async () => Number((await row<{ u: number | null }>(gws[0], `SELECT SUM(used) AS u FROM window_buckets WHERE scope = ?`, [`sub:${sub}`])).u ?? 0);
    const open = async () => Number((await row<{ o: number | null }>(gws[0], `SELECT SUM(open_slices) AS o FROM window_buckets WHERE scope = ?`, [`sub:${sub}`])).o ?? 0);
    const usage = () => row<{ n: number; c: number }>(gws[0], `SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS c FROM usage WHERE city_id = 'pr' AND user_id = 'racer' AND status = 'ok'`);

    let offset = 0;
    async function advance(ms: number) {
      offset += ms;
      assert.equal((await admin.post('/v1/env/upsert', { key: 'TEST_CLOCK_OFFSET_MS', value: String(offset) })).status, 200);
      // every process sees the moved clock: the 5 h window is empty again on both
      for (const u of urls) await until(async () => (await windowsOn(u))['5h'] === 0, 10_000, `the clock moved on ${u}`);
    }
    async function race(k: number): Promise<number> {
      const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => call(urls[i % 2], 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: `race ${k} ${i}` }] } })));
      const ok = rs.filter((r) => r.status === 200).length;
      for (const r of rs.filter((x) => x.status !== 200)) {
        assert.equal(r.status, 429, r.text);
        assert.equal(errorOf(r).code, 'plan_window_exhausted');
      }
      await until(async () => (await open()) === 0, 10_000, 'every slice returned');
      return ok;
    }

    const served: number[] = [];
    served.push(await race(1));
    for (let k = 2; k <= 4; k++) {
      await advance(5 * 3600_000 + 61_000);
      served.push(await race(k));
    }
    t.diagnostic(`served per 5 h window: ${served.join(', ')}`);
    assert.deepEqual(served, [10, 10, 10, 0], 'each 5 h window serves exactly 1,000; the 7 d window stops at 3,000');
    await until(async () => (await usage()).n === 30, 10_000, 'usage written');
    assert.equal((await usage()).c, 3000, 'Σ usage credits = 3,000');
    assert.equal(await counted(), 3000, 'Σ counted by the windows = Σ usage credits');
    assert.equal(stub.requests.filter((r) => r.path === '/v1/chat/completions' && JSON.stringify(r.body).includes('race ')).length, 30, 'the upstream saw exactly the calls served');
  } finally {
    await Promise.all(gws.map((g) => g.stop()));
    await stub.close();
  }
});
