// Per-call credit holds (LedgerBilling), in process on a real database: exactly-once closing
// of holds, caps, the sweeper, and reservations racing each other. They serve the edge
// (Workers) and cities with a user budget; Node processes serve other calls from credit
// leases (lease.test.ts), which fall back to these holds.
// On SQLite, or on a fresh PostgreSQL database when the suite runs on PostgreSQL.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Db } from '../../src/db/database.ts';
import type { Hold } from '../../src/kernel/metering.ts';
import { LedgerBilling } from '../../src/services/balance/index.ts';
import type { SqlTarget } from '../helpers/sql.ts';
import { inProcessGateway, type InProcess } from './in-process.ts';
import { assertBooksBalance } from './setup.ts';

let world: InProcess;
let db: Db;
let billing: LedgerBilling;
let dbTarget: SqlTarget;
before(async () => {
  world = await inProcessGateway('billing', { BALANCE_HOLD_TTL_SECONDS: '60' });
  ({ db, dbTarget } = world);
  billing = new LedgerBilling(world.gw.context);
});
after(() => world.close());

const balance = (user: string) => world.balance(user);
const fund = (user: string, credits: number) => world.fund(user, credits);
const reserve = (user: string, credits: number) => billing.reserve({ cityId: 'c', userId: user, credits, requestId: 'req', model: 'm', mode: 'text' });

test('settle charges the cost and returns the rest, exactly once; release after settle is a no-op', async () => {
  await fund('a', 1000);
  const h = await reserve('a', 300);
  assert.equal(await balance('a'), 700);
  await Promise.all([billing.settle(h, 120), billing.settle(h, 120), billing.release(h), billing.settle(h, 5)]);
  const b = await balance('a');
  assert.ok(b === 880 || b === 995 || b === 1000, `exactly one close applied (got ${b})`);
  await billing.settle(h, 120);
  await billing.release(h);
  assert.equal(await balance('a'), b);
  const closes = await db.kysely.selectFrom('ledger').select(['kind']).where('ref', '=', h.id).execute();
  assert.equal(closes.length, 2, 'hold + one close');
  await assertBooksBalance(dbTarget);
});

test('a cost above the hold takes the excess from the balance, never below zero', async () => {
  await fund('b', 500);
  const h = await reserve('b', 100);
  await billing.settle(h, 250);
  assert.equal(await balance('b'), 250);
  const h2 = await reserve('b', 200);
  await billing.settle(h2, 10_000);
  assert.equal(await balance('b'), 0);
  await assert.rejects(reserve('b', 1), (e: { status?: number; code?: string }) => e.status === 402 && e.code === 'insufficient_credits');
  await assertBooksBalance(dbTarget);
});

test('200 reservations racing for a balance of 50 holds: exactly 50 succeed', async () => {
  await fund('r', 50 * 7);
  const rs = await Promise.allSettled(Array.from({ length: 200 }, () => reserve('r', 7)));
  const held = rs.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<Hold>).value);
  assert.equal(held.length, 50);
  for (const r of rs) if (r.status === 'rejected') assert.equal(r.reason?.code, 'insufficient_credits', String(r.reason));
  assert.equal(await balance('r'), 0);
  await Promise.all(held.map((h, i) => (i % 2 ? billing.release(h) : billing.settle(h, 3))));
  assert.equal(await balance('r'), 25 * 7 + 25 * 4);
  await assertBooksBalance(dbTarget);
});

test('the sweeper returns stale holds once; a late settle still charges once, from the balance', async () => {
  await fund('s', 1000);
  const h = await reserve('s', 400);
  const sweeper = billing;
  assert.equal(await sweeper.sweep(Date.now() + 61_000), 1);
  assert.equal(await sweeper.sweep(Date.now() + 61_000), 0);
  assert.equal(await balance('s'), 1000);
  await Promise.all([billing.settle(h, 150), billing.settle(h, 150)]);
  assert.equal(await balance('s'), 850);
  await billing.release(h);
  assert.equal(await balance('s'), 850);
  const kinds = (await db.kysely.selectFrom('ledger').select('kind').where('ref', '=', h.id).orderBy('seq').execute()).map((r) => r.kind);
  assert.deepEqual(kinds, ['hold', 'expire', 'settle']);
  await assertBooksBalance(dbTarget);
});

test('a free reservation touches nothing; a forged hold of another user applies nothing', async () => {
  await fund('f', 100);
  const free = await reserve('f', 0);
  assert.equal(free.credits, 0);
  await billing.release(free);
  assert.equal(await balance('f'), 100);
  const h = await reserve('f', 60);
  await billing.settle({ ...h, userId: 'a' }, 0);
  assert.equal(await balance('f'), 40, 'a hold only closes for its own user');
  await billing.settle(h, 10);
  assert.equal(await balance('f'), 90);
  await assertBooksBalance(dbTarget);
});
