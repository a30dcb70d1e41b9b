// Charging AI calls, black-box: a real citygate in front of the stub OpenAI upstream, with
// prices set through MODEL_PRICES.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, client, errorOf } from '../helpers/http.ts';
import { startAiWorld, tokenFor, type AiWorld } from '../ai/setup.ts';
import { aiCharged, assertBooksBalance, row, rows, unsettled, until, type Client } from './setup.ts';

// 1 credit per input token, 2 per output token for 'aliased'; a flat 1000 per call otherwise,
// so a reservation equals the charge and "covers exactly 10 calls" is exact.
const PRICES = {
  'stub-model': { per_request: 1000 },
  'stub-500': { per_request: 1000 },
  aliased: { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 },
  'stub-stream-slow': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 },
};

let w: AiWorld;
let admin: Client;
before(async () => {
  w = await startAiWorld({ env: { MODEL_PRICES: JSON.stringify(PRICES), USAGE_FLUSH_MS: '20', AI_UPSTREAM_TIMEOUT_MS: '5000' } });
  admin = w.admin;
});
after(() => w?.close());

let n = 0;
async function fundedUser(credits: number): Promise<{ token: string; user: string; city: string; c: Client }> {
  const user = `u${++n}`;
  const token = await tokenFor(admin, 'charge', user);
  if (credits) {
    const r = await admin.post('/v1/balance/adjust', { city_id: 'charge', user_id: user, credits, reason: 'test', idempotency_key: `fund-${user}` });
    assert.equal(r.status, 200, r.text);
  }
  return { token, user, city: 'charge', c: client(w.gw.url, token) };
}

const chat = (token: string, body: Record<string, unknown>) => call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token, body });
const upstreamChats = () => w.stub.requests.filter((r) => r.path === '/v1/chat/completions').length;

const openHolds = (user: string) => unsettled(w.gw, user);
async function usageOf(user: string): Promise<{ n: number; credits: number }> {
  return await row<{ n: number; credits: number }>(w.gw, `SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS credits FROM usage WHERE user_id = ?`, [user]);
}
const chargeRows = (user: string) => rows<{ credits: number; reason: string }>(w.gw, `SELECT credits, reason FROM ledger WHERE user_id = ? AND kind = 'charge'`, [user]);

test('50 concurrent calls, balance covers exactly 10: ≤ 10 reach the upstream, the rest 402; balance = ledger = usage', async () => {
  const u = await fundedUser(10_000);
  const before = upstreamChats();
  const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => chat(u.token, { model: 'stub-model', messages: [{ role: 'user', content: `call ${i}` }] })));
  const ok = rs.filter((r) => r.status === 200).length;
  const refused = rs.filter((r) => r.status === 402);
  assert.equal(ok + refused.length, 50, rs.map((r) => r.status).join(','));
  assert.ok(upstreamChats() - before <= 10, `${upstreamChats() - before} calls reached the upstream`);
  assert.equal(upstreamChats() - before, ok);
  assert.equal(ok, 10);
  for (const r of refused) assert.equal(errorOf(r).code, 'insufficient_credits');
  await until(async () => (await openHolds(u.user)) === 0, 5000, 'holds settled');
  await until(async () => (await usageOf(u.user)).n === 50, 5000, 'usage flushed');
  const me = await u.c.get('/v1/balance/me');
  assert.equal(me.body.credits, 0);
  const b = (await assertBooksBalance(w.gw)).get(`charge/${u.user}`)!;
  assert.equal(b.balance, b.ledger);
  assert.equal((await usageOf(u.user)).credits, 10_000 - b.balance, 'usage credits = what the ledger charged');
  const list = await u.c.get('/v1/usage/me?limit=200');
  assert.equal(list.body.items.length, 50);
  assert.equal(list.body.items.filter((x: { status: string }) => x.status === 'ok').length, 10);
});

test('a streamed call is charged once, by the usage the stub reports', async () => {
  const u = await fundedUser(1_000_000);
  const res = await fetch(`${w.gw.url}/v1/ai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${u.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'aliased', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'count these words please' }] }),
  });
  assert.equal(res.status, 200);
  const text = await res.text();
  const usage = text
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)))
    .find((e) => e.usage)?.usage;
  assert.ok(usage, 'the stub reported usage');
  const expected = usage.prompt_tokens * 1 + usage.completion_tokens * 2;
  await until(async () => (await openHolds(u.user)) === 0, 5000, 'charge written');
  assert.deepEqual((await chargeRows(u.user)).map((m) => [m.credits, m.reason]), [[-expected, '1 call']], 'one charge = the reported usage at the model price');
  assert.equal((await u.c.get('/v1/balance/me')).body.credits, 1_000_000 - expected);
  await until(async () => (await usageOf(u.user)).n === 1, 5000, 'usage flushed');
  assert.equal((await usageOf(u.user)).credits, expected);
  const rec = (await u.c.get('/v1/usage/me')).body.items[0];
  assert.deepEqual([rec.input_tokens, rec.output_tokens, rec.status, rec.mode], [usage.prompt_tokens, usage.completion_tokens, 'ok', 'compat']);
});

test('an upstream 500 charges nothing and is recorded as an error', async () => {
  const u = await fundedUser(5000);
  const r = await chat(u.token, { model: 'stub-500', messages: [{ role: 'user', content: 'boom' }] });
  assert.equal(r.status, 502, r.text);
  await until(async () => (await openHolds(u.user)) === 0, 5000, 'hold released');
  assert.equal((await u.c.get('/v1/balance/me')).body.credits, 5000);
  assert.equal(await aiCharged(w.gw, u.user), 0, 'nothing charged');
  assert.deepEqual(await chargeRows(u.user), []);
  await until(async () => (await usageOf(u.user)).n === 1, 5000, 'usage flushed');
  const rec = (await u.c.get('/v1/usage/me')).body.items[0];
  assert.equal(rec.status, 'error');
  assert.equal(rec.credits, 0);
  await assertBooksBalance(w.gw);
});

test('an aborted stream is charged once, for what was consumed before the abort (documented policy)', async () => {
  const u = await fundedUser(1_000_000);
  const ac = new AbortController();
  const res = await fetch(`${w.gw.url}/v1/ai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${u.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'stub-stream-slow', stream: true, max_tokens: 100, messages: [{ role: 'user', content: 'go on' }] }),
    signal: ac.signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read();
  await reader.read();
  ac.abort();
  await until(async () => (await openHolds(u.user)) === 0, 5000, 'hold closed after the abort');
  const moves = await chargeRows(u.user);
  assert.equal(moves.length, 1, 'charged exactly once');
  const charged = -moves[0].credits;
  assert.ok(charged > 0, 'what the upstream consumed is charged');
  assert.ok(charged < 100 * 2, 'less than the full reservation (100 output tokens at 2 credits): the stream was cut short');
  await until(async () => (await usageOf(u.user)).n === 1, 5000, 'usage flushed');
  const rec = (await u.c.get('/v1/usage/me')).body.items[0];
  assert.equal(rec.status, 'aborted');
  assert.equal(rec.credits, charged);
  await assertBooksBalance(w.gw);
});

test('admin calls are not charged; a user with no balance gets 402 before any upstream call', async () => {
  const before = upstreamChats();
  const r = await chat(w.gw.adminKey, { model: 'stub-model', messages: [{ role: 'user', content: 'admin' }] });
  assert.equal(r.status, 200);
  const broke = await fundedUser(0);
  const mid = upstreamChats();
  const p = await chat(broke.token, { model: 'stub-model', messages: [{ role: 'user', content: 'poor' }] });
  assert.equal(p.status, 402);
  assert.equal(errorOf(p).code, 'insufficient_credits');
  assert.equal(upstreamChats(), mid, 'no upstream call');
  assert.equal(mid, before + 1);
});

test('usage reports: per user, admin list with filters, summary per day × city × model; isolation', async () => {
  const zed = await tokenFor(admin, 'charge-2', 'zed');
  const other = client(w.gw.url, zed);
  await admin.post('/v1/balance/adjust', { city_id: 'charge-2', user_id: 'zed', credits: 5000, reason: 't', idempotency_key: 'zed' });
  assert.equal((await chat(zed, { model: 'stub-model', messages: [{ role: 'user', content: 'z' }] })).status, 200);
  await until(async () => (await other.get('/v1/usage/me')).body.items.length === 1, 5000, 'zed usage');
  const mine = (await other.get('/v1/usage/me')).body.items;
  assert.ok(mine.every((x: { city_id: string; user_id: string }) => x.city_id === 'charge-2' && x.user_id === 'zed'));
  assert.equal((await other.get('/v1/usage/me?city_id=charge')).status, 403);
  assert.equal((await other.get('/v1/usage/list')).status, 403);
  assert.equal((await other.get('/v1/usage/summary')).status, 403);

  const list = await admin.get('/v1/usage/list?city_id=charge&status=error&limit=5');
  assert.equal(list.status, 200);
  assert.equal(list.body.items.length, 5);
  assert.ok(list.body.items.every((x: { city_id: string; status: string }) => x.city_id === 'charge' && x.status === 'error'));
  const page2 = await admin.get(`/v1/usage/list?city_id=charge&status=error&limit=5&cursor=${list.body.next_cursor}`);
  assert.equal(page2.body.items.length, 5);
  assert.equal(new Set([...list.body.items, ...page2.body.items].map((x: { usage_id: string }) => x.usage_id)).size, 10);
  const m = await admin.get('/v1/usage/list?model=aliased');
  assert.ok(m.body.items.length >= 1 && m.body.items.every((x: { model: string }) => x.model === 'aliased'));
  const future = await admin.get(`/v1/usage/list?from=${Date.now() + 60_000}`);
  assert.equal(future.body.items.length, 0);

  const s = await admin.get('/v1/usage/summary');
  assert.equal(s.status, 200, s.text);
  const daily = s.body.items.filter((x: { city_id: string; model: string }) => x.city_id === 'charge' && x.model === 'stub-model');
  assert.ok(daily.length > 0);
  // The UTC days of the records themselves (not today's date: a run may cross midnight).
  const dbDays = await rows<{ created_at: number; credits: number }>(w.gw, `SELECT created_at, credits FROM usage WHERE city_id = 'charge' AND model = 'stub-model'`);
  const byDay = new Map<string, { calls: number; credits: number }>();
  for (const r of dbDays) {
    const d = new Date(r.created_at).toISOString().slice(0, 10);
    const g = byDay.get(d) ?? { calls: 0, credits: 0 };
    g.calls++;
    g.credits += r.credits;
    byDay.set(d, g);
  }
  assert.deepEqual(
    Object.fromEntries(daily.map((r: { day: string; calls: number; credits: number }) => [r.day, { calls: r.calls, credits: r.credits }])),
    Object.fromEntries(byDay),
    'the rollup matches the records, day by day',
  );
  const only = await admin.get('/v1/usage/summary?city_id=charge-2');
  assert.ok(only.body.items.every((x: { city_id: string }) => x.city_id === 'charge-2'));
  assert.equal((await admin.get('/v1/usage/summary?from=2026-02-01&to=2026-01-01')).status, 400);
});

test('models without a price are named in a boot warning and show price null to the admin', async () => {
  const line = w.gw
    .stdout()
    .split('\n')
    .find((l) => l.includes('models without a price are free to call'));
  assert.ok(line, 'the boot warning is logged');
  const models = JSON.parse(line).models as string[];
  assert.ok(models.includes('stub-400'));
  assert.ok(!models.includes('stub-model') && !models.includes('aliased'));
  const cat = (await admin.get('/v1/ai/models')).body.items;
  assert.equal(cat.find((m: { id: string }) => m.id === 'stub-400').price, null);
  assert.deepEqual(cat.find((m: { id: string }) => m.id === 'stub-model').price, { per_request: 1000 });
});
