// A process killed while it holds a slice of a subscriber's windows (issue 34): another process
// sweeps the slice once its TTL has passed and gives back what the scope's usage records do not
// account for — the windows count exactly what the calls cost, not the whole slice.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { PROJECT_CONFIG } from '../ai/setup.ts';
import { startGateway, tempDir } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { row, until } from './setup.ts';
import { startOpenAIStub } from '../stubs/openai.ts';

test('a killed process’s window slice comes back, less what its calls spent', { timeout: 120_000 }, async () => {
  const stub = await startOpenAIStub();
  const dir = tempDir('citygate-plan-crash-');
  writeFileSync(join(dir, 'citygate.config.ts'), PROJECT_CONFIG);
  const env = {
    TEXTPROVIDER_API_KEY: 'sk-stub',
    TEXTPROVIDER_BASE_URL: stub.url,
    TEXTPROVIDER_MODELS: 'stub-model',
    MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 100 } }),
    USAGE_FLUSH_MS: '20',
    BALANCE_FLUSH_MS: '20',
    BALANCE_LEASE_TTL_SECONDS: '2',
  };
  const a = await startGateway({ dir, env });
  let b: Awaited<ReturnType<typeof startGateway>> | null = null;
  try {
    const admin = client(a.url, a.adminKey);
    assert.equal((await admin.post('/v1/cities/create', { name: 'pc', city_id: 'pc' })).status, 200);
    const p = await admin.post('/v1/plans/create', { city_id: 'pc', name: 'Pro', interval: 'month', price: { amount: 100, currency: 'usd' }, credits: 10_000, windows: [{ window: '5h', limit: 1000 }], overflow: false });
    assert.equal((await admin.post('/v1/plans/assign', { city_id: 'pc', user_id: 'u', plan_id: p.body.plan.id })).status, 200);
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'pc', user_id: 'u' })).body.user_token as string;
    const sub = (await client(a.url, token).get('/v1/plans/me')).body.subscription.id as string;
    const scope = `sub:${sub}`;
    for (let i = 0; i < 3; i++) assert.equal((await call(a.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: `c ${i}` }] } })).status, 200);
    const used = async () => Number((await row<{ u: number | null }>(a, 'SELECT SUM(used) AS u FROM window_buckets WHERE scope = ?', [scope])).u ?? 0);
    const slices = async () => Number((await row<{ n: number }>(a, 'SELECT COUNT(*) AS n FROM window_slices WHERE scope = ?', [scope])).n);
    await until(async () => Number((await row<{ n: number }>(a, "SELECT COUNT(*) AS n FROM usage WHERE user_id = 'u' AND city_id = 'pc'")).n) === 3, 5000, 'usage written');
    // Killed while its slice (half of the 1,000 left: 500) is still out: no graceful return.
    assert.equal(await slices(), 1, 'the slice is recorded');
    assert.equal(await used(), 500, 'the whole slice counts while it is out');
    await a.stop('SIGKILL');
    b = await startGateway({ dir, env });
    await until(async () => (await slices()) === 0, 20_000, 'the dead slice swept');
    assert.equal(await used(), 300, 'the windows count what the three calls cost, not the slice');
    const me = await client(b.url, token).get('/v1/plans/me');
    assert.equal(me.body.subscription.windows[0].used, 300);
  } finally {
    await b?.stop();
    await a.stop().catch(() => null);
    await stub.close();
  }
});
