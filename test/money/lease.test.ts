// Credit leases (LeaseBilling, the money path of Node processes), in process on a real
// database: holds served from a leased slice, charges written once per flush as one ledger row
// per user, racing reservations on one and on two "processes", a failing flush retried as the
// same batch, a crashed process's lease returned by another's sweeper, and a graceful stop that
// leaves nothing leased. On SQLite, or on a fresh PostgreSQL database when the suite runs there.
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { after, before, test } from 'node:test';
import type { Db } from '../../src/db/database.ts';
import type { Gateway } from '../../src/kernel/gateway.ts';
import { BILLING, type Hold } from '../../src/kernel/metering.ts';
import { LeaseBilling } from '../../src/services/balance/index.ts';
import { ON_POSTGRES } from '../helpers/postgres.ts';
import type { SqlTarget } from '../helpers/sql.ts';
import { inProcessGateway, type InProcess } from './in-process.ts';
import { assertBooksBalance, rows, until } from './setup.ts';

let world: InProcess;
let db: Db;
let gw: Gateway;
let billing: LeaseBilling;
let dbTarget: SqlTarget;
before(async () => {
  world = await inProcessGateway('lease', { BALANCE_FLUSH_MS: '20', BALANCE_LEASE_TTL_SECONDS: '5' });
  ({ db, gw, dbTarget } = world);
  billing = gw.context.use<LeaseBilling>(BILLING)!;
  assert.ok(billing instanceof LeaseBilling, 'a Node gateway bills through credit leases');
});
after(() => world.close());

const balanceRow = (user: string) => world.balanceRow(user);
const balance = (user: string) => world.balance(user);
const fund = (user: string, credits: number) => world.fund(user, credits);
const reserveOn = (b: LeaseBilling, user: string, credits: number) =>
  b.reserve({ cityId: 'c', userId: user, credits, requestId: 'req', model: 'm', mode: 'text' });
const reserve = (user: string, credits: number) => reserveOn(billing, user, credits);
const charges = async (user: string) =>
  (await rows<{ credits: number; reason: string }>(dbTarget, `SELECT credits, reason FROM ledger WHERE user_id = ? AND kind = 'charge' ORDER BY seq`, [user])).map(
    (r) => ({ credits: Number(r.credits), reason: r.reason }),
  );
/** A second "process" on the same database: its own leases, its own flushes. */
const otherProcess = () => new LeaseBilling(gw.context);
/** A process that will die: it never flushes on its own (its flush interval is an hour). */
function doomedProcess(): LeaseBilling {
  const env = gw.context.env;
  const slowEnv = Object.create(env, { get: { value: (k: string) => (k === 'BALANCE_FLUSH_MS' ? '3600000' : env.get(k)) } });
  return new LeaseBilling(Object.create(gw.context, { env: { value: slowEnv } }));
}

test('calls are held from a leased slice and charged once per flush: one ledger row per user, never the hold', async () => {
  await fund('a', 10_000);
  const hs = await Promise.all(Array.from({ length: 5 }, () => reserve('a', 300)));
  const during = await balanceRow('a');
  assert.equal(during.credits, 10_000, 'a lease is not spending: the balance does not move');
  assert.ok(during.leased >= 1500, `the lease covers the holds in flight (leased ${during.leased})`);
  await Promise.all(hs.map((h, i) => billing.settle(h, 100 + i)));
  await billing.settle(hs[0], 100); // a second settle of the same hold is a no-op
  await billing.release(hs[1]);
  await until(async () => (await balance('a')) === 10_000 - 510, 3000, 'charges flushed');
  assert.deepEqual(await charges('a'), [{ credits: -510, reason: '5 calls' }]);
  await until(async () => (await balanceRow('a')).leased === 0, 3000, 'the idle lease returned');
  await assertBooksBalance(dbTarget);
});

test('200 reservations racing for a balance of 50 holds: exactly 50 succeed, on one process and across two', async () => {
  for (const [user, processes] of [['r1', [billing]], ['r2', [billing, otherProcess()]]] as const) {
    await fund(user, 50 * 7);
    const rs = await Promise.allSettled(Array.from({ length: 200 }, (_, i) => reserveOn(processes[i % processes.length], user, 7)));
    const held = rs.flatMap((r, i) => (r.status === 'fulfilled' ? [{ hold: r.value, by: processes[i % processes.length] }] : []));
    assert.equal(held.length, 50, `${user}: exactly 50 holds`);
    for (const r of rs) if (r.status === 'rejected') assert.equal(r.reason?.code, 'insufficient_credits', String(r.reason));
    await Promise.all(held.map(({ hold, by }, i) => (i % 2 ? by.release(hold) : by.settle(hold, 3))));
    await until(async () => (await balance(user)) === 50 * 7 - 25 * 3, 3000, `${user} charged 25 × 3`);
    await until(async () => (await balanceRow(user)).leased === 0, 3000, `${user} leases returned`);
    for (const other of processes.slice(1)) await other.stop();
  }
  await assertBooksBalance(dbTarget);
});

test('a cost above the hold is charged from the balance, never below zero', async () => {
  await fund('b', 500);
  const h = await reserve('b', 100);
  await billing.settle(h, 250);
  await until(async () => (await balance('b')) === 250, 3000, 'charged 250');
  const h2 = await reserve('b', 200);
  await billing.settle(h2, 10_000);
  await until(async () => (await balanceRow('b')).leased === 0, 3000, 'lease returned');
  assert.equal(await balance('b'), 0);
  await assert.rejects(reserve('b', 1), (e: { status?: number; code?: string; message?: string }) => e.status === 402 && e.code === 'insufficient_credits');
  await assertBooksBalance(dbTarget);
});

test('credits leased by another process are not free: a reservation there is refused until they come back', async () => {
  await fund('l', 1000);
  const other = otherProcess();
  const h = await reserveOn(other, 'l', 600); // takes ≥ 600, up to half of the rest
  const leased = (await balanceRow('l')).leased;
  assert.ok(leased >= 600 && leased < 1000, `leased ${leased}`);
  await assert.rejects(reserve('l', 1000 - leased + 1), (e: { code?: string }) => e.code === 'insufficient_credits');
  await other.settle(h, 50);
  await other.stop(); // graceful: flushes and returns everything
  assert.deepEqual(await balanceRow('l'), { credits: 950, leased: 0 });
  const h2 = await reserve('l', 950);
  await billing.settle(h2, 950);
  await until(async () => (await balance('l')) === 0, 3000, 'charged');
  await assertBooksBalance(dbTarget);
});

test('a failing flush keeps its charges and is retried as the same batch: charged once when the database recovers', async (t) => {
  if (ON_POSTGRES) return t.skip('uses a SQLite trigger to make the write fail');
  await fund('w', 1000);
  await db.batch(
    [
      `CREATE TABLE IF NOT EXISTS test_fail_charge (x INTEGER)`,
      `INSERT INTO test_fail_charge VALUES (1)`,
      `CREATE TRIGGER IF NOT EXISTS test_fail_charge BEFORE INSERT ON ledger
       WHEN NEW.kind = 'charge' AND EXISTS (SELECT 1 FROM test_fail_charge) BEGIN SELECT RAISE(ABORT, 'disk on fire'); END`,
    ].map((q) => sql.raw(q).compile(db.kysely)),
  );
  const h = await reserve('w', 400);
  await billing.settle(h, 321);
  await new Promise((r) => setTimeout(r, 200)); // several flush attempts fail
  assert.equal(await balance('w'), 1000, 'nothing charged while the write fails');
  assert.equal(billing.state.pending, 321, 'the charge waits in memory');
  await db.batch([sql`DELETE FROM test_fail_charge`.compile(db.kysely)]);
  await until(async () => (await balance('w')) === 679, 3000, 'charged after recovery');
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(await charges('w'), [{ credits: -321, reason: '1 call' }], 'exactly once');
  await assertBooksBalance(dbTarget);
});

test('a process that dies with a lease: another process returns it after the lease TTL; nothing is credited, at most its unflushed charges are lost', async () => {
  await fund('d', 5000);
  const dead = doomedProcess();
  const hs: Hold[] = await Promise.all([reserveOn(dead, 'd', 500), reserveOn(dead, 'd', 500)]);
  await dead.settle(hs[0], 200); // finished, never flushed: the process "dies" now (no stop, no flush)
  const leased = (await balanceRow('d')).leased;
  assert.ok(leased >= 1000, `leased ${leased}`);
  const leaseOfD = async () => (await rows(dbTarget, `SELECT owner FROM leases WHERE user_id = 'd'`)).length;
  await billing.sweep(Date.now());
  assert.equal(await leaseOfD(), 1, 'a live lease is not swept');
  assert.ok((await billing.sweep(Date.now() + 6000)) >= 1, 'the dead process’s lease is returned');
  assert.equal(await billing.sweep(Date.now() + 6000), 0, 'once');
  assert.deepEqual(await balanceRow('d'), { credits: 5000, leased: 0 }, 'no credit created, the 200 in flight lost (≤ its lease)');
  assert.equal(await leaseOfD(), 0);
  await assertBooksBalance(dbTarget);
});

test('a lease swept while its process stalled: its late flush applies nothing, and a new lease charges only what came after', async () => {
  for (const wakesWith of ['flush', 'take'] as const) {
    const user = `z-${wakesWith}`;
    await fund(user, 5000);
    const slow = doomedProcess();
    const h = await reserveOn(slow, user, 500); // leases 2,500 (half of what is free, whole holds)
    await slow.settle(h, 200); // pending in the stalled process
    assert.ok((await billing.sweep(Date.now() + 6000)) >= 1, 'swept as if its process were dead');
    assert.deepEqual(await balanceRow(user), { credits: 5000, leased: 0 });
    // The process wakes up. Its lease is gone; the sweeper charged what its usage records showed
    // (none here: billed in process), so its pending 200 must not be charged on top of that.
    if (wakesWith === 'flush') {
      await slow.flush();
      assert.deepEqual(await balanceRow(user), { credits: 5000, leased: 0 }, 'the late flush applies nothing');
    }
    const h2 = await reserveOn(slow, user, 2400); // more than its old slice still has: a new take
    await slow.settle(h2, 100);
    await slow.flush(true);
    assert.deepEqual(await balanceRow(user), { credits: 4900, leased: 0 }, `${wakesWith}: only the call after the sweep is charged`);
    await slow.stop();
  }
  await assertBooksBalance(dbTarget);
});

test('a graceful stop writes every charge and returns every lease', async () => {
  await fund('g', 2000);
  const p = otherProcess();
  const h = await reserveOn(p, 'g', 700);
  await p.settle(h, 650);
  await p.stop();
  assert.deepEqual(await balanceRow('g'), { credits: 1350, leased: 0 });
  assert.equal((await rows(dbTarget, `SELECT * FROM leases WHERE user_id = 'g'`)).length, 0);
  await assertBooksBalance(dbTarget);
});
