// A gateway killed with SIGKILL in the middle of a load of charged calls: after a restart,
// every balance equals the sum of its ledger, and the credit leases of the killed process are
// returned once their TTL has passed. (load.test.ts measures what such a kill can cost.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../helpers/http.ts';
import { startAiWorld, tokenFor } from '../ai/setup.ts';
import { assertBooksBalance, row, sleep, until } from './setup.ts';

test('SIGKILL during charged calls: after restart balance = sum of ledger for every user', async () => {
  const prices = { 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 }, 'stub-slow': { per_request: 5000 } };
  const w = await startAiWorld({ env: { MODEL_PRICES: JSON.stringify(prices), AI_UPSTREAM_TIMEOUT_MS: '5000' }, stub: { slowMs: 2000 } });
  let gw = w.gw;
  try {
    const users: string[] = [];
    for (let i = 0; i < 8; i++) {
      const token = await tokenFor(w.admin, 'crash', `user${i}`);
      await w.admin.post('/v1/balance/adjust', { city_id: 'crash', user_id: `user${i}`, credits: 200_000, reason: 'load', idempotency_key: `load-${i}` });
      users.push(token);
    }
    let stop = false;
    let done = 0;
    const worker = async (token: string, slow: boolean) => {
      while (!stop) {
        const r = await call(gw.url, 'POST', '/v1/ai/chat/completions', {
          token,
          body: { model: slow ? 'stub-slow' : 'stub-model', max_tokens: 20, messages: [{ role: 'user', content: 'load test words' }] },
        }).catch(() => null);
        if (!r) return;
        done++;
      }
    };
    const load = users.flatMap((t, i) => [worker(t, false), worker(t, false), worker(t, i % 2 === 0)]);
    await until(() => done >= 40, 10_000, 'load running');
    const leasedBefore = Number((await row<{ l: number }>(gw, `SELECT COALESCE(SUM(leased), 0) AS l FROM balances WHERE city_id = 'crash'`)).l);
    assert.ok(leasedBefore > 0, 'credits were leased by calls in flight when killed');
    await gw.stop('SIGKILL');
    stop = true;
    await Promise.all(load);

    const afterKill = await assertBooksBalance(gw);
    assert.equal([...afterKill.keys()].filter((k) => k.startsWith('crash/')).length, 8);

    gw = await gw.restart({ BALANCE_LEASE_TTL_SECONDS: '1' });
    await sleep(1100);
    // the sweep runs at boot and on the next reservations: returns the killed process's leases
    const extra = await call(gw.url, 'POST', '/v1/ai/chat/completions', { token: users[0], body: { model: 'stub-model', max_tokens: 5, messages: [{ role: 'user', content: 'after' }] } });
    assert.equal(extra.status, 200);
    await until(
      async () => Number((await row<{ n: number }>(gw, `SELECT COUNT(*) AS n FROM leases`)).n) === 0,
      5000,
      'stale leases returned, the new process’s own flushed and returned',
    );
    const books = await assertBooksBalance(gw);
    for (let i = 0; i < 8; i++) {
      const b = books.get(`crash/user${i}`)!;
      const me = await call(gw.url, 'GET', '/v1/balance/me', { token: users[i] });
      assert.equal(me.body.credits, b.ledger, `user${i}: the API shows the ledger's balance`);
      assert.ok(b.balance <= 200_000);
    }
    const leasedAfter = Number((await row<{ l: number }>(gw, `SELECT COALESCE(SUM(leased), 0) AS l FROM balances`)).l);
    assert.equal(leasedAfter, 0, 'the killed process’s leases were returned');
  } finally {
    await gw.stop();
    await w.stub.close();
  }
});

test('a graceful stop (SIGTERM) writes every buffered usage record', async () => {
  const w = await startAiWorld({ env: { MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 10 } }), USAGE_FLUSH_MS: '60000' } });
  try {
    const token = await tokenFor(w.admin, 'grace', 'g');
    await w.admin.post('/v1/balance/adjust', { city_id: 'grace', user_id: 'g', credits: 10_000, reason: 'x', idempotency_key: 'g' });
    const rs = await Promise.all(
      Array.from({ length: 30 }, () => call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: 'x' }] } })),
    );
    assert.ok(rs.every((r) => r.status === 200));
    const count = () => row<{ n: number; c: number }>(w.gw, `SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS c FROM usage WHERE user_id = 'g'`);
    assert.equal((await count()).n, 0, 'still buffered (flush interval 60 s)');
    assert.equal(await w.gw.stop(), 0);
    assert.deepEqual({ ...(await count()) }, { n: 30, c: 300 });
    const daily = await row<{ calls: number; credits: number }>(w.gw, `SELECT SUM(calls) AS calls, SUM(credits) AS credits FROM usage_hourly WHERE city_id = 'grace'`);
    assert.deepEqual({ ...daily }, { calls: 30, credits: 300 });
    await assertBooksBalance(w.gw);
  } finally {
    await w.close();
  }
});
