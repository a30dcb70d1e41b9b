// Users' API keys across processes (issue 33): two gateways on one database — two processes on
// one SQLite file, or two replicas on one PostgreSQL database when the suite runs there. Both
// have verified (and cached) a key; a revoke or an update made through one is applied by the
// other within the time docs/security.md promises for revocations (3 s), and an expired key is
// refused by a process that has it cached. A 50-way race against a key's budget window spread
// over both: Σ charged ≤ the budget, and Σ charges = Σ usage credits.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client, errorOf } from '../helpers/http.ts';
import { sqlGet } from '../helpers/sql.ts';
import { until } from '../helpers/wait.ts';
import { aiCharged, assertBooksBalance, unsettled } from '../money/setup.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

const PROMISED_MS = 3000;
let gw1: TestGateway;
let gw2: TestGateway;
let token: string;

let stub: OpenAIStub;

before(async () => {
  stub = await startOpenAIStub();
  // two models in the catalog; a flat 1000 credits per call
  const env = {
    TEXTPROVIDER_API_KEY: 'sk-stub',
    TEXTPROVIDER_BASE_URL: stub.url,
    TEXTPROVIDER_MODELS: 'stub-model,model-two',
    MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 1000 } }),
    BALANCE_INITIAL_CREDITS: '1000000',
    USAGE_FLUSH_MS: '20',
  };
  gw1 = await startGateway({ env });
  gw2 = await startGateway({ dir: gw1.dir, env });
  const admin = client(gw1.url, gw1.adminKey);
  assert.equal((await admin.post('/v1/cities/create', { name: 'Keys', city_id: 'keys' })).status, 200);
  token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'keys', user_id: 'ada' })).body.user_token;
});
after(async () => {
  await gw2?.stop();
  await gw1?.stop();
  await stub?.close();
});

const me = (base: string, key: string) => call(base, 'GET', '/v1/accounts/me', { token: key });
const models = (base: string, key: string) => call(base, 'GET', '/v1/ai/models', { headers: { 'x-api-key': key } });

async function newKey(body: Record<string, unknown> = {}): Promise<{ id: string; secret: string }> {
  const r = await client(gw1.url, token).post('/v1/accounts/keys/create', { name: 'agent', ...body });
  assert.equal(r.status, 200, r.text);
  return { id: r.body.key.id, secret: r.body.secret };
}

test('a key revoked through one process is refused by the other within 3 s', async () => {
  const { id, secret } = await newKey();
  for (const g of [gw1, gw2]) assert.equal((await me(g.url, secret)).status, 200, 'both processes have verified the key');
  const rv = await client(gw1.url, token).post('/v1/accounts/keys/revoke', { id });
  assert.equal(rv.status, 200, rv.text);
  const t0 = Date.now();
  assert.equal((await me(gw1.url, secret)).status, 401, 'refused at once where it was revoked');
  const r = await until('the other process to refuse the revoked key', async () => {
    const x = await me(gw2.url, secret);
    return x.status === 401 ? x : null;
  }, 10_000);
  const took = Date.now() - t0;
  assert.ok(took < PROMISED_MS, `took ${took} ms`);
  assert.equal(errorOf(r).code, 'key_revoked');
  // and it stays refused on both, by every header
  for (const g of [gw1, gw2]) assert.equal((await models(g.url, secret)).status, 401);
});

test('revoked through the second process: the first refuses it within 3 s too', async () => {
  const { id, secret } = await newKey();
  for (const g of [gw1, gw2]) assert.equal((await me(g.url, secret)).status, 200);
  assert.equal((await client(gw2.url, token).post('/v1/accounts/keys/revoke', { id })).status, 200);
  const t0 = Date.now();
  await until('the first process to refuse it', async () => (await me(gw1.url, secret)).status === 401, 10_000);
  assert.ok(Date.now() - t0 < PROMISED_MS, `took ${Date.now() - t0} ms`);
});

test("an update (the key's models) reaches the other process within 3 s", async () => {
  const { id, secret } = await newKey();
  const ids = async (base: string) => ((await models(base, secret)).body.items as { id: string }[]).map((m) => m.id);
  assert.ok((await ids(gw2.url)).length > 1, 'every model of the catalog at first');
  const one = (await ids(gw1.url))[0];
  assert.equal((await client(gw1.url, token).post('/v1/accounts/keys/update', { id, models: [one] })).status, 200);
  const t0 = Date.now();
  await until('the other process to apply the allow-list', async () => JSON.stringify(await ids(gw2.url)) === JSON.stringify([one]), 10_000);
  assert.ok(Date.now() - t0 < PROMISED_MS, `took ${Date.now() - t0} ms`);
});

test('an expired key is refused by every process that has it cached', async () => {
  const { secret } = await newKey({ expires_at: new Date(Date.now() + 1500).toISOString() });
  for (const g of [gw1, gw2]) assert.equal((await me(g.url, secret)).status, 200);
  for (const g of [gw1, gw2]) {
    const r = await until(`${g.url} to refuse the expired key`, async () => {
      const x = await me(g.url, secret);
      return x.status === 401 ? x : null;
    }, 10_000);
    assert.equal(errorOf(r).code, 'key_expired');
  }
});

test("50 calls at once over both processes against a key's budget window: at most the budget is charged, exactly what the usage records say", async () => {
  const { id, secret } = await newKey({ budget: { credits: 10_000, window: 'day' } });
  const start = (await client(gw1.url, token).get('/v1/balance/me')).body.credits as number;
  const rs = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      call([gw1, gw2][i % 2].url, 'POST', '/v1/ai/chat/completions', { token: secret, body: { model: 'stub-model', messages: [{ role: 'user', content: `race ${i}` }] } }),
    ),
  );
  const ok = rs.filter((r) => r.status === 200).length;
  const refused = rs.filter((r) => r.status === 402);
  assert.equal(ok + refused.length, 50, rs.map((r) => r.status).join(','));
  for (const r of refused) assert.equal(errorOf(r).code, 'key_budget_exceeded');
  assert.ok(ok <= 10, `${ok} calls served on a budget for 10`);
  assert.equal(ok, 10, 'a budget for 10 calls serves 10 (a slice held by the other process is waited for)');

  await until('charges written, leases returned', async () => (await unsettled(gw1, 'ada')) === 0, 20_000);
  const usage = async () => (await sqlGet<{ n: number; c: number }>(gw1, 'SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS c FROM usage WHERE key_id = ?', [id]))!;
  await until('every usage record', async () => Number((await usage()).n) === 50, 20_000);
  const charged = await aiCharged(gw1, 'ada');
  assert.equal(charged, Number((await usage()).c), 'Σ charges = Σ usage credits');
  assert.equal(charged, 10 * 1000);
  assert.equal(start - ((await client(gw2.url, token).get('/v1/balance/me')).body.credits as number), charged);
  await assertBooksBalance(gw1);
  const view = ((await client(gw2.url, token).post('/v1/accounts/keys/list', {})).body.items as any[]).find((k) => k.id === id);
  assert.ok(view.spent.credits >= charged && view.spent.credits <= 10_000, JSON.stringify(view.spent));
});
