// The lease sweeper runs on a timer on every Node process: the credits a killed process had
// leased come back within BALANCE_LEASE_TTL_SECONDS plus a sweep interval with no traffic at all.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../helpers/http.ts';
import { startAiWorld, tokenFor } from '../ai/setup.ts';
import { startGateway } from '../helpers/gateway.ts';
import { row, until } from './setup.ts';

test('a killed process’s lease is returned by another process with no traffic', async () => {
  const env = { MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 100 } }), BALANCE_LEASE_TTL_SECONDS: '1', BALANCE_FLUSH_MS: '60000' };
  const w = await startAiWorld({ env });
  const other = await startGateway({ dir: w.gw.dir, env: { ...env, TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: w.stub.url, TEXTPROVIDER_MODELS: 'stub-model' } });
  try {
    const token = await tokenFor(w.admin, 'sweep', 's');
    await w.admin.post('/v1/balance/adjust', { city_id: 'sweep', user_id: 's', credits: 100_000, reason: 'x', idempotency_key: 's' });
    const r = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(r.status, 200);
    const leased = async () => Number((await row<{ l: number }>(w.gw, `SELECT COALESCE(SUM(leased), 0) AS l FROM balances WHERE city_id = 'sweep'`)).l);
    assert.ok((await leased()) > 0, 'the call leased a slice');
    await w.gw.stop('SIGKILL');
    const killedAt = Date.now();
    // no call anywhere from here on: only the other process's timer can return it
    await until(async () => (await leased()) === 0, 15_000, 'the lease is returned');
    assert.ok(Date.now() - killedAt < 15_000);
    const b = await row<{ credits: number }>(w.gw, `SELECT credits FROM balances WHERE city_id = 'sweep'`);
    assert.ok(b.credits <= 100_000 && b.credits >= 100_000 - 100, 'nothing credited; at most the unwritten charge of the one call');
  } finally {
    await other.stop();
    await w.close();
  }
});
