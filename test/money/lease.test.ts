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
/**
 * A process that only flushes when told to (its flush interval is an hour): one that will die,
 * or one whose database connection a test gets in between (`db`).
 */
function doomedProcess(db: Db = gw.context.db): LeaseBilling {
  const env = gw.context.env;
  const slowEnv = Object.create(env, { get: { value: (k: string) => (k === 'BALANCE_FLUSH_MS' ? '3600000' : env.get(k)) } });
  return new LeaseBilling(Object.create(gw.context, { db: { value: db }, env: { value: slowEnv } }));
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

test('credits stranded in another process’s idle lease: a reservation waits for them to come back instead of a false 402', async () => {
  await fund('s', 1000);
  const other = otherProcess();
  const h = await reserveOn(other, 's', 100); // takes 500: half of what is free, whole holds
  await other.settle(h, 100); // done: 400 of its slice sit unused until the lease goes idle
  // once its flush (BALANCE_FLUSH_MS 20) has charged the 100: read at once, a loaded machine
  // saw the row before it (500) or after (400)
  await until(async () => (await balanceRow('s')).leased === 400 && (await balance('s')) === 900, 3000, `the 100 charged, 400 leased: ${JSON.stringify(await balanceRow('s'))}`);
  // 900 are this user's and nobody uses the 400: the call is served once the idle lease is back.
  const t0 = Date.now();
  const h2 = await reserve('s', 900);
  const waited = Date.now() - t0;
  assert.ok(waited >= 500 && waited < 3000, `served after the idle return (${waited} ms)`);
  await billing.settle(h2, 900);
  await until(async () => (await balanceRow('s')).leased === 0 && (await balance('s')) === 0, 3000, `charged, returned: ${JSON.stringify(await balanceRow('s'))} ${JSON.stringify(await rows(dbTarget, 'SELECT * FROM leases WHERE user_id = ?', ['s']))}`);
  // With nothing leased elsewhere, a refusal is immediate.
  const t1 = Date.now();
  await assert.rejects(reserve('s', 1), (e: { code?: string }) => e.code === 'insufficient_credits');
  assert.ok(Date.now() - t1 < 300, `refused at once (${Date.now() - t1} ms)`);
  await other.stop();
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

test('a flush whose commit is lost with its connection (a database restart) is retried once applied: no charge is dropped', async () => {
  await fund('amb', 5000);
  // A process whose database connection dies right after a COMMIT: the batch is in, the caller
  // sees "Connection terminated unexpectedly", as pg reports a restart mid-commit.
  let loseNext = false;
  const lossy: Db = Object.create(db, {
    batch: {
      value: async (qs: Parameters<Db['batch']>[0]) => {
        const r = await db.batch(qs);
        if (loseNext) {
          loseNext = false;
          throw new Error('Connection terminated unexpectedly');
        }
        return r;
      },
    },
  });
  const p = doomedProcess(lossy);
  const h1 = await reserveOn(p, 'amb', 500);
  await p.settle(h1, 100);
  await new Promise((r) => setTimeout(r, 1100)); // idle: the next flush charges 100 and returns the lease
  loseNext = true;
  await p.flush(); // committed, but reported lost: kept for a retry
  const h2 = await reserveOn(p, 'amb', 500); // served from the slice this process still believes it has
  await p.settle(h2, 50);
  await p.flush(); // the retry: its charge key is taken, so it had committed
  const h3 = await reserveOn(p, 'amb', 500); // a new lease
  await p.settle(h3, 25);
  await p.stop();
  assert.deepEqual(
    (await charges('amb')).map((c) => c.credits).reduce((a, b) => a + b, 0),
    -175,
    'every settled call is charged once: 100 + 50 + 25',
  );
  assert.deepEqual(await balanceRow('amb'), { credits: 5000 - 175, leased: 0 }, JSON.stringify(await rows(dbTarget, `SELECT kind, credits, reason, idempotency_key FROM ledger WHERE user_id = 'amb' ORDER BY seq`)));
  await assertBooksBalance(dbTarget);
});

test('a call that takes a new slice while its user’s idle lease is being returned is charged', async () => {
  await fund('ret', 5000);
  // The flush that returns the idle lease is slow to commit (a busy database); a new call of
  // the same user arrives meanwhile and takes a slice.
  let slowFlush = false;
  const slow: Db = Object.create(db, {
    batch: {
      value: async (qs: Parameters<Db['batch']>[0]) => {
        if (slowFlush && qs.some((q) => 'sql' in q && q.sql.includes('UPDATE leases SET returned'))) {
          slowFlush = false;
          await new Promise((r) => setTimeout(r, 300));
        }
        return db.batch(qs);
      },
    },
  });
  const p = doomedProcess(slow);
  const h1 = await reserveOn(p, 'ret', 500);
  await p.settle(h1, 100);
  await new Promise((r) => setTimeout(r, 1100)); // idle: the next flush returns the lease
  slowFlush = true;
  const returning = p.flush();
  await new Promise((r) => setTimeout(r, 50));
  const h2 = await reserveOn(p, 'ret', 500); // while the return is in flight
  await returning;
  await p.settle(h2, 50);
  await p.stop();
  const charged = (await charges('ret')).reduce((a, c) => a + c.credits, 0);
  assert.equal(charged, -150, 'both calls charged: 100 + 50');
  assert.deepEqual(await balanceRow('ret'), { credits: 5000 - 150, leased: 0 });
  await assertBooksBalance(dbTarget);
});
