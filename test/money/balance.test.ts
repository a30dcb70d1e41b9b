// balance over HTTP: adjust idempotency, never below zero (also across processes sharing one
// database), starting grant exactly once, isolation between cities and users.
import assert from 'node:assert/strict';
import { sqlAll } from '../helpers/sql.ts';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';
import { assertBooksBalance, cityWithUser, type Client } from './setup.ts';

let gw: TestGateway;
let admin: Client;
let alice: Client;
let bob: Client; // another city
let carol: Client; // alice's city, another user
before(async () => {
  gw = await startGateway({ env: { BALANCE_INITIAL_CREDITS: '1000' } });
  admin = client(gw.url, gw.adminKey);
  alice = client(gw.url, await cityWithUser(admin, 'bal-a', 'alice'));
  carol = client(gw.url, await cityWithUser(admin, 'bal-a', 'carol'));
  bob = client(gw.url, await cityWithUser(admin, 'bal-b', 'bob'));
});
after(() => gw?.stop());

test('a new user sees the starting grant, once, even on concurrent first calls', async () => {
  const rs = await Promise.all(Array.from({ length: 10 }, () => alice.get('/v1/balance/me')));
  for (const r of rs) {
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { city_id: 'bal-a', user_id: 'alice', credits: 1000, usd: 0.001 });
  }
  const h = await alice.get('/v1/balance/history');
  assert.equal(h.status, 200);
  assert.equal(h.body.items.length, 1);
  assert.equal(h.body.items[0].kind, 'grant');
  assert.equal(h.body.items[0].credits, 1000);
  await assertBooksBalance(gw);
});

test('the same adjust idempotency key twice changes the balance once; another amount with it is a 409', async () => {
  const body = { city_id: 'bal-a', user_id: 'alice', credits: 5_000_000, reason: 'promo', idempotency_key: 'promo-1' };
  const first = await admin.post('/v1/balance/adjust', body);
  assert.equal(first.status, 200, first.text);
  assert.equal(first.body.credits, 5_001_000);
  assert.equal(first.body.replayed, false);
  const again = await admin.post('/v1/balance/adjust', body);
  assert.equal(again.status, 200);
  assert.equal(again.body.replayed, true);
  assert.equal(again.body.credits, 5_001_000);
  assert.equal(again.body.entry.entry_id, first.body.entry.entry_id);
  // concurrent duplicates of a fresh key
  const dup = { ...body, credits: 7, idempotency_key: 'promo-2' };
  const rs = await Promise.all(Array.from({ length: 8 }, () => admin.post('/v1/balance/adjust', dup)));
  assert.ok(rs.every((r) => r.status === 200));
  assert.equal(rs.filter((r) => !r.body.replayed).length, 1);
  assert.equal((await alice.get('/v1/balance/me')).body.credits, 5_001_007);
  const other = await admin.post('/v1/balance/adjust', { ...body, credits: 1 });
  assert.equal(other.status, 409);
  assert.equal(errorOf(other).code, 'idempotency_key_reused');
  assert.equal((await alice.get('/v1/balance/me')).body.credits, 5_001_007);
  await assertBooksBalance(gw);
});

test('a negative adjust never takes a balance below zero', async () => {
  const r = await admin.post('/v1/balance/adjust', { city_id: 'bal-a', user_id: 'carol', credits: -1001, reason: 'claw back', idempotency_key: 'cb-1' });
  assert.equal(r.status, 409);
  assert.equal(errorOf(r).code, 'insufficient_credits');
  assert.equal((await carol.get('/v1/balance/me')).body.credits, 1000);
  const ok = await admin.post('/v1/balance/adjust', { city_id: 'bal-a', user_id: 'carol', credits: -1000, reason: 'claw back', idempotency_key: 'cb-2' });
  assert.equal(ok.status, 200);
  assert.equal(ok.body.credits, 0);
  assert.equal((await admin.post('/v1/balance/adjust', { city_id: 'bal-a', user_id: 'carol', credits: 0, reason: 'x', idempotency_key: 'z' })).status, 400);
  await assertBooksBalance(gw);
});

test('users see only their own balance and history; bureaus only their city; users cannot adjust', async () => {
  await bob.get('/v1/balance/me');
  const a = (await alice.get('/v1/balance/history?limit=200')).body.items;
  assert.ok(a.length >= 3);
  assert.ok(a.every((e: { entry_id: string }) => typeof e.entry_id === 'string'));
  const b = await bob.get('/v1/balance/history');
  assert.equal(b.body.items.length, 1, 'bob sees his grant only');
  const cross = await alice.get('/v1/balance/me?city_id=bal-b');
  assert.equal(cross.status, 403);
  assert.equal(errorOf(cross).code, 'city_mismatch');
  assert.equal((await alice.post('/v1/balance/adjust', { city_id: 'bal-a', user_id: 'alice', credits: 5, reason: 'me', idempotency_key: 'self' })).status, 403);
  assert.equal((await alice.get('/v1/balance/list?city_id=bal-a')).status, 403);
  assert.equal((await alice.get('/v1/balance/ledger')).status, 403);

  const bureau = client(gw.url, (await admin.post('/v1/bureaus/create', { city_id: 'bal-b', name: 'b backend' })).body.bureau_token);
  const list = await bureau.get('/v1/balance/list');
  assert.equal(list.status, 200);
  assert.deepEqual(list.body.items.map((i: { user_id: string }) => i.user_id), ['bob']);
  assert.equal((await bureau.get('/v1/balance/list?city_id=bal-a')).status, 403);
  assert.equal((await bureau.get('/v1/balance/ledger?city_id=bal-a')).status, 403);
  assert.equal((await bureau.post('/v1/balance/adjust', { city_id: 'bal-a', user_id: 'alice', credits: 5, reason: 'x', idempotency_key: 'b1' })).status, 403);
  const own = await bureau.post('/v1/balance/adjust', { city_id: 'bal-b', user_id: 'bob', credits: 5, reason: 'support', idempotency_key: 'b1' });
  assert.equal(own.status, 200);
  assert.equal(own.body.credits, 1005);
  const led = await bureau.get('/v1/balance/ledger?user_id=bob');
  assert.ok(led.body.items.every((e: { city_id: string }) => e.city_id === 'bal-b'));
  assert.match(led.body.items[0].actor, /^bureau:/);

  const all = await admin.get('/v1/balance/list?limit=1');
  assert.equal(all.body.items.length, 1);
  assert.ok(all.body.next_cursor);
  const next = await admin.get(`/v1/balance/list?limit=1&cursor=${encodeURIComponent(all.body.next_cursor)}`);
  assert.notEqual(next.body.items[0].user_id + next.body.items[0].city_id, all.body.items[0].user_id + all.body.items[0].city_id);
  assert.equal((await admin.get('/v1/balance/list?cursor=garbage')).status, 400);
});

test('history pages with a cursor, newest first', async () => {
  for (let i = 0; i < 5; i++) {
    await admin.post('/v1/balance/adjust', { city_id: 'bal-b', user_id: 'bob', credits: i + 1, reason: `page ${i}`, idempotency_key: `page-${i}` });
  }
  const seen: { entry_id: string; reason: string | null; kind: string; created_at: string }[] = [];
  let cursor: string | null = null;
  do {
    const r: { body: { items: typeof seen; next_cursor: string | null } } = await bob.get(`/v1/balance/history?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    assert.ok(r.body.items.length <= 2);
    seen.push(...r.body.items);
    cursor = r.body.next_cursor;
  } while (cursor);
  assert.equal(new Set(seen.map((e) => e.entry_id)).size, 7);
  // Newest first across pages: the five adjusts in reverse, then the bureau's support credit,
  // then the starting grant.
  assert.deepEqual(
    seen.map((e) => e.reason ?? e.kind),
    ['page 4', 'page 3', 'page 2', 'page 1', 'page 0', 'support', 'starting grant'],
  );
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i - 1].created_at >= seen[i].created_at, 'created_at never increases');
});

test('the ledger is append-only in the database itself', async () => {
  await assert.rejects(sqlAll(gw, 'UPDATE ledger SET credits = credits + 1'), /append-only/);
  await assert.rejects(sqlAll(gw, 'DELETE FROM ledger'), /append-only/);
  await assert.rejects(sqlAll(gw, `UPDATE balances SET credits = -1 WHERE user_id = 'carol'`), /CHECK/i);
});

test('two gateway processes on one database: concurrent debits never overdraw', async () => {
  const other = await startGateway({ dir: gw.dir, env: { BALANCE_INITIAL_CREDITS: '1000' } });
  try {
    const admin2 = client(other.url, gw.adminKey);
    await admin.post('/v1/balance/adjust', { city_id: 'bal-a', user_id: 'dave', credits: 10, reason: 'x', idempotency_key: 'dave-fund' });
    // dave now holds 1000 (grant) + 10; take 1 credit 60 times from both processes at once
    await admin.post('/v1/balance/adjust', { city_id: 'bal-a', user_id: 'dave', credits: -1000, reason: 'x', idempotency_key: 'dave-drain' });
    const rs = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        (i % 2 ? admin : admin2).post('/v1/balance/adjust', { city_id: 'bal-a', user_id: 'dave', credits: -1, reason: 'race', idempotency_key: `race-${i}` }),
      ),
    );
    assert.equal(rs.filter((r) => r.status === 200).length, 10);
    assert.equal(rs.filter((r) => r.status === 409).length, 50);
    const d = (await assertBooksBalance(gw)).get('bal-a/dave')!;
    assert.equal(d.balance, 0);
  } finally {
    await other.stop();
  }
});
