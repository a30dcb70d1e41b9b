// Credit leases: the money path of a long-lived gateway process (issue 11).
//
// Per-call holds (LedgerBilling) write two transactions per call — a hold, then its settle —
// each with ledger rows, the balance and a holds row. Here a process instead takes a slice of
// a user's balance once (a lease: balances.leased grows, the balance itself does not move),
// serves the holds of that user's calls from the slice in memory, and writes what the calls
// cost back in one batch per BALANCE_FLUSH_MS: one ledger row (kind 'charge') per user per
// flush, whose credits are the sum of the usage records' credits of the calls it covers.
//
//   take    one batch: lease += X, balances.leased += X, only if credits − leased ≥ what is
//           missing. Every reservation, on every process, checks credits − leased, so two
//           processes can never lease or hold the same credit. When what is missing sits in
//           another live process's lease, the call waits (as long as an idle lease takes to
//           come back: 1 s + 3 flushes + 0.5 s, 2.1 s by default) before it is refused; a
//           waiting call is no use of its own process's lease, so that one goes back too:
//           a slice its process did not use is no reason for a 402.
//   flush   one batch for all users: a 'charge' ledger row (−Σ costs, never below zero),
//           balances.credits and balances.leased go down by the charges, and a lease with no
//           call in flight for IDLE_MS gives back the rest.
//   renew   leases carry renewed_at; a process renews its own every TTL/3.
//   sweep   any process returns leases not renewed for BALANCE_LEASE_TTL_SECONDS (their process
//           died): their credits become free again, and in the same batch it charges what the
//           dead process recorded but never wrote: Σ credits of the usage rows the lease billed
//           (usage.lease_owner) minus Σ its 'charge' rows, both since the lease was taken
//           (leases.created_at, the same process's clock: a lease's calls are recorded after its
//           take, and an earlier lease's last charge and records precede its return, which the
//           next take waits for; earlier leases were settled then, and their records may be
//           pruned since). A process's flushes apply only while
//           its lease row is the one it took, so a stalled one cannot charge those calls again.
//
// So: balance = Σ ledger at every commit; a crash loses at most the charges of calls whose
// usage record was lost too (the usage sink's last flush window), never creates credits (a
// lease is not money) and never charges twice (each flush has its own ledger key, is retried as
// the very same batch, and applies only to the lease it was built for). A graceful stop
// flushes and returns every lease.
//
// Statements that depend on an earlier one of the same batch find its row by a fresh id
// (take_id, flush_id, swept_by), as the ledger does, so a retried batch changes nothing twice.
// On PostgreSQL every batch locks the balance row before the lease row (lockBalance), so
// takes, flushes and sweeps of one user queue instead of deadlocking.
//
// Not used where a process has no graceful stop (Workers: its isolate may vanish with the
// slice), for cities with a user budget (spending must be known per reservation there), or for
// durable holds (image and video jobs, saved with the job and settled by whichever process
// finishes it): those keep the exact per-call holds of LedgerBilling.
import { sql, type CompiledQuery } from 'kysely';
import { greatest, isUniqueViolation, least, lockRowsOf, type BatchResult, type Db } from '../../db/database.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import type { Billing, Hold } from '../../kernel/metering.ts';
import { initialGrant, insufficient, LedgerBilling } from './billing.ts';
import { elsewhereWaitMs, flushMsOf, IDLE_MS, positive, SerialFlusher } from './flusher.ts';
import { moveStatements, newEntryId, openStatements, OPEN_LEN } from './ledger.ts';

export const DEFAULT_LEASE_TTL_S = 30;
/** A take asks for this many times the hold that needed it (half of what is free at most). */
const SLICE_HOLDS = 16;
/** Users per flush batch (the rest go in the next one). */
const USERS_PER_FLUSH = 200;
const SWEEP_EVERY_MS = 10_000;
/** How long a flush's mark (lease_flushes) is kept: far longer than any retry of it. */
const MARK_KEEP_MS = 3_600_000;

type HoldWithPool = Hold & { [k: symbol]: Pool | undefined };

interface Pool {
  cityId: string;
  userId: string;
  /** What this process's lease holds, as far as it knows. */
  leased: number;
  /** Holds of the calls in flight. */
  held: number;
  /** Charges of finished calls, not yet written, and how many calls they are. */
  pending: number;
  calls: number;
  /** Credits the flush in flight charges or returns. */
  flushing: number;
  /** created_at of this process's lease row: a row created since (after a sweep) is another lease. */
  since: number | null;
  lastUse: number;
  /** A take in flight: resolves to what it took, and what was free in the database. */
  taking: Promise<Took> | null;
  /** A flush in flight returns this idle lease (a take waits for it). */
  returning: boolean;
}

/** What a take got, what was free in the database, and what other live processes lease of the user. */
type Took = { took: number; available: number; elsewhere: number };

const free = (p: Pool) => p.leased - p.held - p.pending - p.flushing;

interface Flush {
  statements: CompiledQuery[];
  /** Per user: what the flush charges and returns, its lease generation, and where its lease
   * UPDATE and DELETE sit in the batch (their row counts tell whether the lease was still there). */
  parts: { pool: Pool; amount: number; since: number | null; update: number; remove: number | null }[];
}

export class LeaseBilling implements Billing {
  readonly gw: GatewayContext;
  /** Per-call holds: the fallback, and where holds reserved before a lease existed close. */
  readonly perCall: LedgerBilling;
  /** This process's name on its leases. */
  readonly owner = newId('proc', 12);
  #pools = new Map<string, Pool>();
  /** A hold's pool, kept on the hold under this instance's own key (no per-call WeakMap entry for the GC to trace). */
  readonly #poolKey = Symbol('lease pool');
  readonly #flusher = new SerialFlusher({ run: (final) => this.#flushOnce(final), everyMs: () => this.flushMs, more: () => this.#pools.size > 0 });
  /** A flush batch whose commit is unknown: retried as is before anything else is written. */
  #retry: Flush | null = null;
  #lastRenew = Date.now();
  #lastSweep = 0;
  #stopped = false;
  #holdSeq = 0;

  constructor(gw: GatewayContext, perCall = new LedgerBilling(gw)) {
    this.gw = gw;
    this.perCall = perCall;
  }

  get db(): Db {
    return this.gw.db;
  }

  get flushMs(): number {
    return flushMsOf(this.gw);
  }

  get ttlMs(): number {
    return positive(this.gw.env.get('BALANCE_LEASE_TTL_SECONDS'), DEFAULT_LEASE_TTL_S) * 1000;
  }

  async reserve(a: { cityId: string; userId: string; credits: number; requestId: string; model: string; mode: string; durable?: boolean }): Promise<Hold> {
    this.#maybeSweep();
    const credits = Math.max(0, Math.ceil(a.credits));
    if (credits === 0 || !Number.isSafeInteger(credits) || a.durable || this.#stopped || !this.gw.config.gracefulStop) return this.perCall.reserve(a);
    const settings = this.gw.cities.peek(a.cityId)?.settings ?? (await this.gw.cities.settings(a.cityId));
    if (settings.user_budget) return this.perCall.reserve(a);
    let waitUntil = 0;
    for (;;) {
      // Looked up again after every wait: a flush forgets a pool with nothing leased. A call
      // that waits does not count as a use: its process's own idle fragment must go back too,
      // or two processes each waiting for the other's fragment both refuse (seen: 125 here,
      // 250 there, 625 free, a call of 1000 refused on each after the whole wait).
      const p = this.#pool(a.cityId, a.userId);
      if (free(p) >= credits) {
        p.held += credits;
        p.lastUse = Date.now();
        // A lease hold lives in this process's memory only (never a holds row): an id unique
        // here is enough, and a counter costs nothing where drawing 12 random bytes did.
        const hold: Hold = { id: `hold_${this.owner}.${(this.#holdSeq++).toString(36)}`, cityId: a.cityId, userId: a.userId, credits, lease: this.owner };
        (hold as HoldWithPool)[this.#poolKey] = p;
        return hold;
      }
      // One take at a time per user; the calls waiting on it share its answer.
      p.taking ??= this.#take(p, credits - free(p), credits).finally(() => (p.taking = null));
      const got = await p.taking;
      if (got.took > 0 || free(p) + got.available >= credits) continue; // enough now, or try a take of this call's own size
      // Not free here, but leased by another live process: its slice may be idle (it leased
      // more than its calls used), and an idle lease comes back within IDLE_MS and a flush.
      // Refusing now would be a false 402, so wait for it that long, then refuse.
      if (free(p) + got.available + got.elsewhere >= credits) {
        waitUntil ||= Date.now() + elsewhereWaitMs(this.flushMs);
        if (Date.now() < waitUntil) {
          await new Promise((r) => setTimeout(r, Math.min(100, Math.max(10, this.flushMs / 2))));
          continue;
        }
      }
      throw insufficient(credits, Math.max(0, free(p)) + got.available);
    }
  }

  #pool(cityId: string, userId: string): Pool {
    const key = `${cityId}\n${userId}`;
    let p = this.#pools.get(key);
    if (!p) {
      p = { cityId, userId, leased: 0, held: 0, pending: 0, calls: 0, flushing: 0, since: null, lastUse: Date.now(), taking: null, returning: false };
      this.#pools.set(key, p);
    }
    return p;
  }

  async settle(hold: Hold, credits: number): Promise<void> {
    const p = (hold as HoldWithPool)[this.#poolKey];
    if (!p) return this.perCall.settle(hold, credits);
    (hold as HoldWithPool)[this.#poolKey] = undefined;
    p.held -= hold.credits;
    // The measured cost, even above the hold (an estimate): the flush takes what the slice does
    // not cover from the balance, never below zero.
    p.pending += Math.max(0, Math.ceil(credits));
    p.calls++;
    p.lastUse = Date.now();
    this.#schedule();
  }

  async release(hold: Hold): Promise<void> {
    const p = (hold as HoldWithPool)[this.#poolKey];
    if (!p) return this.perCall.release(hold);
    (hold as HoldWithPool)[this.#poolKey] = undefined;
    p.held -= hold.credits;
    p.lastUse = Date.now();
    this.#schedule();
  }

  /** What this process holds in leases and has not written yet (for tests and /metrics). */
  get state(): { users: number; leased: number; held: number; pending: number } {
    let leased = 0, held = 0, pending = 0;
    for (const p of this.#pools.values()) {
      leased += p.leased;
      held += p.held;
      pending += p.pending + p.flushing;
    }
    return { users: this.#pools.size, leased, held, pending };
  }

  // ---- take ----------------------------------------------------------------------------

  /** Leases at least `missing` more credits of the user (a slice of whole holds); took 0 when not free. */
  async #take(p: Pool, missing: number, hold: number): Promise<Took> {
    // A flush in flight (or waiting for its retry) may be returning this user's idle lease:
    // taking into that row meanwhile would have the return give back the new slice too, and the
    // calls it serves would be charged against a lease that is gone. So the take runs after that
    // flush is done (a flush built from now on leaves this pool's lease alone: it is taking).
    if (p.returning) await this.flush().catch(() => {});
    const want = hold * SLICE_HOLDS;
    const db = this.db;
    const at = Date.now();
    const takeId = newId('take', 12);
    const freeInDb = sql`(b.credits - b.leased)`;
    // At least what is missing; beyond that up to half of what is free, so other processes
    // serving the same user still find credits to lease, and never more than `want`. Whole
    // holds only: slices of odd sizes would strand a hold's worth split across processes.
    const amount = greatest(db, missing, sql`(${least(db, want, sql`${freeInDb} / 2`)} / ${hold}) * ${hold}`);
    const mine = sql`owner = ${this.owner} AND city_id = ${p.cityId} AND user_id = ${p.userId}`;
    const res = await db.batch([
      ...openStatements(db, p.cityId, p.userId, initialGrant(this.gw), at),
      sql`INSERT INTO leases (owner, city_id, user_id, credits, take_id, took, renewed_at, created_at)
        SELECT ${this.owner}, b.city_id, b.user_id, ${amount}, ${takeId}, ${amount}, ${at}, ${at}
        FROM balances b WHERE b.city_id = ${p.cityId} AND b.user_id = ${p.userId} AND ${freeInDb} >= ${missing}
        ${lockRowsOf(db, 'b')}
        ON CONFLICT (owner, city_id, user_id) DO UPDATE
        SET credits = leases.credits + excluded.took, take_id = excluded.take_id, took = excluded.took, renewed_at = excluded.renewed_at`.compile(db.kysely),
      sql`UPDATE balances SET leased = leased + (SELECT took FROM leases WHERE ${mine} AND take_id = ${takeId})
        WHERE city_id = ${p.cityId} AND user_id = ${p.userId} AND EXISTS (SELECT 1 FROM leases WHERE ${mine} AND take_id = ${takeId})`.compile(db.kysely),
      sql`SELECT b.credits, b.leased, l.took, l.credits AS lease, l.created_at AS since,
          (SELECT COALESCE(SUM(o.credits), 0) FROM leases o WHERE o.city_id = b.city_id AND o.user_id = b.user_id
            AND o.owner <> ${this.owner} AND o.swept_by IS NULL AND o.renewed_at >= ${at - this.ttlMs}) AS elsewhere
        FROM balances b LEFT JOIN leases l ON l.owner = ${this.owner} AND l.city_id = b.city_id AND l.user_id = b.user_id AND l.take_id = ${takeId}
        WHERE b.city_id = ${p.cityId} AND b.user_id = ${p.userId}`.compile(db.kysely),
    ]);
    const r = res[OPEN_LEN + 2].rows[0] as { credits: number; leased: number; took: number | null; lease: number | null; since: number | null; elsewhere: number } | undefined;
    const took = r?.took === null || r?.took === undefined ? 0 : Number(r.took);
    if (took > 0) {
      const since = Number(r!.since);
      if (p.since !== null && since !== p.since) {
        // This process stalled past the lease TTL and a sweeper returned its lease, charging what
        // its usage records showed: what it still had pending is not charged again.
        this.gw.log('warn', 'billing: a credit lease was swept while this process held it', { city: p.cityId, user: p.userId, dropped: p.pending });
        p.pending = 0;
        p.calls = 0;
        p.leased = Number(r!.lease);
      } else p.leased += took;
      p.since = since;
      this.#schedule();
    }
    return { took, available: r ? Math.max(0, Number(r.credits) - Number(r.leased)) : 0, elsewhere: r ? Number(r.elsewhere) : 0 };
  }

  // ---- flush ---------------------------------------------------------------------------

  #schedule(): void {
    if (!this.#stopped) this.#flusher.schedule();
  }

  /** Writes the charges of finished calls and returns idle leases (all of them when `final`). */
  flush(final = false): Promise<void> {
    return this.#flusher.flush(final);
  }

  async #flushOnce(final: boolean): Promise<void> {
    const f = this.#retry ?? this.#build(final);
    if (!f) return;
    this.#retry = f;
    let results: BatchResult[] | null = null;
    try {
      results = await this.db.batch(f.statements);
    } catch (e) {
      // The same batch again: a UNIQUE clash (its mark, or a charge key) means it had committed.
      if (!isUniqueViolation(e)) {
        if (!this.gw.databaseDown(e)) this.gw.log('warn', 'billing: writing lease charges failed, retrying', { error: String(e) });
        return;
      }
    }
    this.#retry = null;
    for (const part of f.parts) {
      const pool = part.pool;
      pool.flushing = 0;
      pool.returning = false;
      const applied = results ? results[part.update].changes === 1 : true; // a UNIQUE clash: it had committed
      if (pool.since !== part.since) continue; // a take since found the lease swept and started over
      if (applied) pool.leased = part.remove !== null ? 0 : Math.max(0, pool.leased - part.amount); // as the row: never below 0
      else {
        // The lease was swept (this process stalled past the TTL): the sweeper charged what the
        // usage records showed, so the charges of this flush were not written again.
        this.gw.log('warn', 'billing: a credit lease was swept while this process held it', { city: pool.cityId, user: pool.userId, dropped: part.amount });
        pool.leased = 0;
        pool.since = null;
      }
      // Its lease row removed (an idle flush); a retry that found its mark had committed it whole.
      if (part.remove !== null && (results === null || results[part.remove].changes === 1)) pool.since = null;
      // Forgotten once its lease row is gone too (an empty row is removed when the pool is idle).
      if (pool.since === null && pool.leased <= 0 && pool.held === 0 && pool.pending === 0 && !pool.taking) this.#pools.delete(`${pool.cityId}\n${pool.userId}`);
    }
  }

  #build(final: boolean): Flush | null {
    const db = this.db;
    const at = Date.now();
    const flushId = newId('flush', 12);
    // First: this flush's mark. A retry of a flush that had committed (its COMMIT lost with the
    // connection) fails right here on the primary key, so nothing of it applies twice.
    const statements: CompiledQuery[] = [sql`INSERT INTO lease_flushes (flush_id, owner, at) VALUES (${flushId}, ${this.owner}, ${at})`.compile(db.kysely)];
    const parts: Flush['parts'] = [];
    for (const p of this.#pools.values()) {
      if (parts.length >= USERS_PER_FLUSH) break;
      const idle = p.held === 0 && !p.taking && (final || at - p.lastUse >= IDLE_MS);
      const back = idle ? Math.max(0, p.leased - p.pending) : 0;
      if (p.pending === 0 && back === 0 && !(idle && p.since !== null)) {
        if (idle) this.#pools.delete(`${p.cityId}\n${p.userId}`); // nothing leased (any more)
        continue;
      }
      const update = statements.length + (this.db.dialect === 'postgres' ? 1 : 0);
      const mine = this.#flushStatements(p, p.pending, back, p.calls, idle, flushId, at);
      parts.push({ pool: p, amount: p.pending + back, since: p.since, update, remove: idle ? statements.length + mine.length - 1 : null });
      p.returning = idle;
      statements.push(...mine);
      p.flushing = p.pending + back;
      p.pending = 0;
      p.calls = 0;
    }
    if (this.#pools.size > 0 && at - this.#lastRenew >= this.ttlMs / 3) {
      this.#lastRenew = at;
      statements.push(sql`UPDATE leases SET renewed_at = ${at} WHERE owner = ${this.owner} AND swept_by IS NULL`.compile(db.kysely));
      statements.push(sql`DELETE FROM lease_flushes WHERE at < ${at - MARK_KEEP_MS}`.compile(db.kysely));
    }
    return statements.length > 1 ? { statements, parts } : null;
  }

  /**
   * One user's part of a flush: charge `charge`, give back `charge + back` of the lease, and
   * when `idle` remove the (then empty) lease row. Nothing applies if the lease row is not the
   * one this process took (`since`): a sweeper returned it and charged its usage records.
   */
  #flushStatements(p: Pool, charge: number, back: number, calls: number, idle: boolean, flushId: string, at: number): CompiledQuery[] {
    const db = this.db;
    const mine = sql`owner = ${this.owner} AND city_id = ${p.cityId} AND user_id = ${p.userId}`;
    const out = [...lockBalance(db, p.cityId, p.userId)];
    // The lease shrinks by what is charged and given back (by what it still has, if a sweeper
    // took it while this process stalled); flush_id makes a retried batch a no-op here.
    // An idle lease gives back all it still has (whatever this process believes it holds).
    const given = idle ? sql.ref('credits') : least(db, sql.ref('credits'), charge + back);
    out.push(
      sql`UPDATE leases SET returned = ${given}, credits = credits - ${given},
        flush_id = ${flushId}, renewed_at = ${at}
        WHERE ${mine} AND created_at = ${p.since ?? -1} AND swept_by IS NULL AND COALESCE(flush_id, '') <> ${flushId}`.compile(db.kysely),
      sql`UPDATE balances SET leased = ${greatest(db, 0, sql`leased - (SELECT returned FROM leases WHERE ${mine} AND flush_id = ${flushId})`)}
        WHERE city_id = ${p.cityId} AND user_id = ${p.userId} AND EXISTS (SELECT 1 FROM leases WHERE ${mine} AND flush_id = ${flushId})`.compile(db.kysely),
    );
    if (charge > 0) {
      out.push(
        ...moveStatements(db, {
          entryId: newEntryId(),
          key: `charge:${flushId}:${p.cityId}:${p.userId}`,
          cityId: p.cityId,
          userId: p.userId,
          kind: 'charge',
          join: sql`JOIN leases l ON l.owner = ${this.owner} AND l.city_id = b.city_id AND l.user_id = b.user_id`,
          guard: sql`l.flush_id = ${flushId}`,
          delta: sql`-${least(db, charge, sql`b.credits`)}`,
          ref: this.owner,
          reason: `${calls} call${calls === 1 ? '' : 's'}`,
          at,
        }),
      );
    }
    if (idle) out.push(sql`DELETE FROM leases WHERE ${mine} AND flush_id = ${flushId} AND credits <= 0`.compile(db.kysely));
    return out;
  }

  // ---- sweep ---------------------------------------------------------------------------

  #maybeSweep(): void {
    const now = Date.now();
    if (now - this.#lastSweep < Math.min(SWEEP_EVERY_MS, this.ttlMs)) return;
    this.#lastSweep = now;
    this.gw.waitUntil(this.sweep(now));
  }

  #sweeper: ReturnType<typeof setTimeout> | null = null;

  /**
   * Sweeps on a timer too (a long-lived process; not on Workers), so the leases of a process
   * that died come back within the TTL plus one sweep interval even when no call comes.
   */
  startSweeper(): void {
    if (this.#stopped || this.#sweeper) return;
    const every = Math.min(SWEEP_EVERY_MS, this.ttlMs);
    this.#sweeper = setTimeout(() => {
      this.#sweeper = null;
      this.#maybeSweep();
      this.startSweeper();
    }, every);
    (this.#sweeper as { unref?: () => void }).unref?.();
  }

  /** Returns leases of processes that stopped renewing them, and the per-call holds' sweep. */
  async sweep(now = Date.now()): Promise<number> {
    this.#lastSweep = now;
    const db = this.db;
    const cutoff = now - this.ttlMs;
    const stale = await db.kysely
      .selectFrom('leases')
      .select(['owner', 'city_id', 'user_id', 'created_at'])
      .where('renewed_at', '<', cutoff)
      .where('owner', '<>', this.owner)
      .limit(500)
      .execute();
    let swept = 0;
    for (const l of stale) {
      const sweepId = newId('sweep', 12);
      const its = sql`owner = ${l.owner} AND city_id = ${l.city_id} AND user_id = ${l.user_id} AND swept_by = ${sweepId}`;
      // What the process recorded (usage rows it billed) but never wrote to the ledger: its
      // charges since its last flush. Charged now, once (the next sweep finds nothing unpaid).
      // Both sums cover this lease's life only: records of the process's earlier leases were
      // charged when those were returned, and may have been pruned since (retention).
      const since = Number(l.created_at);
      const unpaid = sql`((SELECT COALESCE(SUM(u.credits), 0) FROM usage u WHERE u.lease_owner = ${l.owner} AND u.city_id = ${l.city_id} AND u.user_id = ${l.user_id} AND u.created_at >= ${since})
        + (SELECT COALESCE(SUM(g.credits), 0) FROM ledger g WHERE g.kind = 'charge' AND g.ref = ${l.owner} AND g.city_id = ${l.city_id} AND g.user_id = ${l.user_id} AND g.created_at >= ${since}))`;
      const entryId = newEntryId();
      const res = await db.batch([
        ...lockBalance(db, l.city_id, l.user_id),
        sql`UPDATE leases SET swept_by = ${sweepId}
          WHERE owner = ${l.owner} AND city_id = ${l.city_id} AND user_id = ${l.user_id} AND swept_by IS NULL AND renewed_at < ${cutoff}`.compile(db.kysely),
        sql`UPDATE balances SET leased = ${greatest(db, 0, sql`leased - (SELECT credits FROM leases WHERE ${its})`)}
          WHERE city_id = ${l.city_id} AND user_id = ${l.user_id} AND EXISTS (SELECT 1 FROM leases WHERE ${its})`.compile(db.kysely),
        ...moveStatements(db, {
          entryId,
          key: `recover:${sweepId}`,
          cityId: l.city_id,
          userId: l.user_id,
          kind: 'charge',
          guard: sql`EXISTS (SELECT 1 FROM leases WHERE ${its}) AND ${unpaid} > 0`,
          delta: sql`-${least(db, sql`b.credits`, unpaid)}`,
          ref: l.owner,
          reason: 'charges of a stopped process, from its usage records',
          at: now,
        }),
        sql`DELETE FROM leases WHERE ${its}`.compile(db.kysely),
        sql`SELECT credits FROM ledger WHERE entry_id = ${entryId}`.compile(db.kysely),
      ]);
      if (res[res.length - 2].changes === 1) swept++;
      const recovered = res[res.length - 1].rows[0] as { credits: number } | undefined;
      if (recovered) this.gw.log('warn', 'charged the unwritten calls of a stopped process from its usage records', { city: l.city_id, user: l.user_id, credits: -Number(recovered.credits) });
    }
    if (swept > 0) this.gw.log('warn', 'returned the credit leases of stopped processes', { count: swept });
    return swept + (await this.perCall.sweep(now));
  }

  // ---- stop ----------------------------------------------------------------------------

  /** Graceful stop: writes every charge and returns every lease (waits briefly for calls in flight). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#flusher.stop();
    if (this.#sweeper) clearTimeout(this.#sweeper);
    this.#sweeper = null;
    const deadline = Date.now() + 5000;
    while (this.#pools.size > 0 || this.#retry) {
      await this.flush(true).catch((e) => this.gw.log('error', 'billing: final lease flush failed', { error: String(e) }));
      if (Date.now() > deadline) {
        this.gw.log('error', 'billing: stopped with leases still open; the sweeper returns them', this.state);
        break;
      }
      if (this.#pools.size > 0 || this.#retry) await new Promise((r) => setTimeout(r, 20));
    }
    this.perCall.stop();
  }
}

/** PostgreSQL: lock the balance row first, so batches touching a balance and its leases queue. */
function lockBalance(db: Db, cityId: string, userId: string): CompiledQuery[] {
  if (db.dialect !== 'postgres') return [];
  return [sql`SELECT 1 FROM balances WHERE city_id = ${cityId} AND user_id = ${userId} FOR UPDATE`.compile(db.kysely)];
}

