// The money race of the scale-out issue, shared by the workers and replicas tests: 50 priced
// calls at once, spread round-robin over several gateway URLs, for a user whose credits cover
// exactly 10. At most 10 may succeed, the upstream must see exactly those, and the books must
// be exact afterwards.
import assert from 'node:assert/strict';
import { assertBooksBalance, row, unsettled } from '../money/setup.ts';
import type { OpenAIStub } from '../stubs/openai.ts';
import { call, client, errorOf } from './http.ts';
import type { SqlTarget } from './sql.ts';
import { until } from './wait.ts';

/** Gateway env for the race: a flat 1000 credits per call, usage written within 20 ms. */
export const RACE_ENV = { MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 1000 } }), USAGE_FLUSH_MS: '20' };

export async function moneyRace(o: { urls: string[]; adminKey: string; stub: OpenAIStub; db: SqlTarget; city: string; user: string }): Promise<{ ok: number }> {
  const admin = client(o.urls[0], o.adminKey);
  const c = await admin.post('/v1/cities/create', { name: o.city, city_id: o.city });
  assert.ok(c.status === 200 || c.status === 409, c.text);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: o.city, user_id: o.user })).body.user_token as string;
  const fund = await admin.post('/v1/balance/adjust', { city_id: o.city, user_id: o.user, credits: 10_000, reason: 'race', idempotency_key: `fund-${o.city}-${o.user}` });
  assert.equal(fund.status, 200, fund.text);
  const chats = () => o.stub.requests.filter((r) => r.path === '/v1/chat/completions' && JSON.stringify(r.body).includes(`race ${o.city}`)).length;

  const rs = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      call(o.urls[i % o.urls.length], 'POST', '/v1/ai/chat/completions', {
        token,
        body: { model: 'stub-model', messages: [{ role: 'user', content: `race ${o.city} ${i}` }] },
      }),
    ),
  );
  const ok = rs.filter((r) => r.status === 200).length;
  const refused = rs.filter((r) => r.status === 402);
  assert.equal(ok + refused.length, 50, `every call is 200 or 402: ${rs.map((r) => r.status).join(',')}`);
  for (const r of refused) assert.equal(errorOf(r).code, 'insufficient_credits');
  assert.ok(ok <= 10, `${ok} calls succeeded on credits for 10`);
  assert.equal(chats(), ok, 'the upstream saw exactly the calls that succeeded');
  assert.equal(ok, 10, 'with credits for 10, all 10 are served');

  // charges land within a flush interval; idle leases go back a second later
  await until('charges written, leases returned', async () => (await unsettled(o.db, o.user)) === 0, 10_000);
  const usage = () => row<{ n: number; c: number }>(o.db, `SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS c FROM usage WHERE city_id = ? AND user_id = ?`, [o.city, o.user]);
  await until('usage records written', async () => (await usage()).n === 50, 10_000);
  for (const url of o.urls) assert.equal((await client(url, token).get('/v1/balance/me')).body.credits, 0, `balance on ${url}`);
  const b = (await assertBooksBalance(o.db)).get(`${o.city}/${o.user}`)!;
  assert.equal(b.balance, 0);
  const u = await usage();
  assert.equal(u.c, 10 * 1000, 'usage credits = 10 × 1000 = what the ledger charged');
  return { ok };
}
