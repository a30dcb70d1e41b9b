// User budgets (issue 15): cities/update { user_budget } caps what one user spends per day;
// a call whose reservation would pass it gets 402 budget_exceeded before the upstream is
// called; balance/me shows what is left; other users and other cities are not affected.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, client, errorOf } from '../helpers/http.ts';
import { RICH_USERS, startAiWorld, tokenFor, type AiWorld } from '../ai/setup.ts';
import { until } from '../helpers/wait.ts';

let w: AiWorld;
before(async () => {
  w = await startAiWorld({ env: RICH_USERS });
  // 1 credit per input token, 2 per output token
  const r = await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } }) });
  assert.equal(r.status, 200);
});
after(() => w?.close());

const me = async (t: string) => (await client(w.gw.url, t).get('/v1/balance/me')).body;
const chat = (t: string) =>
  call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: t, body: { model: 'stub-model', max_tokens: 8, messages: [{ role: 'user', content: 'one two three' }] } });

test('a user over the daily budget gets 402 budget_exceeded before the upstream is called; balance/me shows what is left', async () => {
  const t = await tokenFor(w.admin, 'budget-city', 'spender');
  const other = await tokenFor(w.admin, 'budget-city', 'saver');
  const free = await tokenFor(w.admin, 'no-budget-city', 'free');
  const up = await w.admin.post('/v1/cities/update', { city_id: 'budget-city', user_budget: { credits: 150, period: 'day' } });
  assert.equal(up.status, 200, up.text);
  assert.deepEqual(up.body.user_budget, { credits: 150, period: 'day' });

  const b0 = await me(t);
  assert.equal(b0.budget.credits, 150);
  assert.equal(b0.budget.period, 'day');
  assert.equal(b0.budget.spent, 0);
  assert.equal(b0.budget.remaining, 150);
  assert.ok(Date.parse(b0.budget.resets_at) > Date.now());
  assert.equal((await me(free)).budget, undefined, 'a city without a budget shows none');

  let spent = 0;
  let refused = null;
  for (let i = 0; i < 30 && !refused; i++) {
    const before = w.stub.requests.length;
    const r = await chat(t);
    if (r.status === 200) {
      spent += r.body.usage.prompt_tokens + 2 * r.body.usage.completion_tokens;
      // The charge settles just after the answer (on PostgreSQL a few ms later): wait for it.
      await until('the charge settled', async () => (await me(t)).budget.spent === spent);
      continue;
    }
    refused = r;
    assert.equal(w.stub.requests.length, before, 'the upstream was not called');
  }
  assert.ok(refused, 'the budget was never enforced');
  assert.equal(refused.status, 402, refused.text);
  assert.equal(errorOf(refused).code, 'budget_exceeded');
  assert.equal(errorOf(refused).type, 'billing_error');
  assert.ok(spent > 0 && spent <= 150, `spent ${spent}`);
  // Refused because this call's reservation (its worst case) does not fit in what is left.
  const m = /needs up to (\d+) credits but only (\d+) of this user's daily budget of 150 credits are left/.exec(errorOf(refused).message);
  assert.ok(m, errorOf(refused).message);
  assert.equal(Number(m[2]), 150 - spent);
  assert.ok(Number(m[1]) > Number(m[2]));
  const after = await me(t);
  assert.equal(after.budget.spent, spent);
  assert.equal(after.budget.remaining, 150 - spent);
  assert.equal(after.credits, b0.credits - spent, 'the balance paid exactly the calls served');

  assert.equal((await chat(other)).status, 200, 'another user of the city has their own budget');
  assert.equal((await chat(free)).status, 200);

  // Raising the budget lets the user call again; clearing it removes it.
  assert.equal((await w.admin.post('/v1/cities/update', { city_id: 'budget-city', user_budget: { credits: 10_000, period: 'month' } })).status, 200);
  assert.equal((await chat(t)).status, 200);
  assert.equal((await w.admin.post('/v1/cities/update', { city_id: 'budget-city', user_budget: null })).status, 200);
  assert.equal((await me(t)).budget, undefined);
  const bad = await w.admin.post('/v1/cities/update', { city_id: 'budget-city', user_budget: { credits: 5, period: 'week' } });
  assert.equal(bad.status, 400);
  assert.equal(errorOf(bad).param, 'user_budget.period');
});
