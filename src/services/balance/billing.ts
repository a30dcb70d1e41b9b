// Billing: reserve before an upstream call, settle or release after it, each one batch.
//
// A hold is a ledger debit (kind 'hold') made only when the balance covers it; closing the
// hold writes one more ledger row (kind 'settle', 'release' or 'expire') in the same batch as
// the hold's state change, guarded by that change. So the balance equals the sum of its
// ledger at every commit, a crash between reserve and settle leaves a consistent (if still
// held) balance, and each hold is closed exactly once whatever is retried or raced:
//
//   held ──settle──▶ settled        charge the measured cost, return the rest
//   held ──release─▶ released       return everything (the upstream failed)
//   held ──expire──▶ expired        the sweeper returns holds older than the hold TTL
//   held ──settle──▶ settled        … or settles them at their usage record's cost, when the
//                                   call finished but its settle never committed
//   expired ─settle▶ settled        a call that outlived its hold is still charged, from the
//                                   balance and never below zero
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import { isUniqueViolation, least } from '../../db/database.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import { GatewayError } from '../../kernel/errors.ts';
import type { Billing, Hold } from '../../kernel/metering.ts';
import { lowAlertWritten, moveStatements, newEntryId, openStatements, OPEN_LEN, usdOf } from './ledger.ts';
import { dispatchSoon } from '../webhooks/dispatch.ts';
import { checkBudget } from './budget.ts';

export const DEFAULT_HOLD_TTL_S = 3600;
const SWEEP_EVERY_MS = 60_000;
/** Pauses between attempts of a settle whose write failed (≈ 2 minutes in all). */
const RETRY_MS = [250, 500, 1000, 2000, 4000, 8000, 15_000, 30_000, 60_000];

export function initialGrant(gw: GatewayContext): number {
  const v = Number(gw.env.get('BALANCE_INITIAL_CREDITS') ?? 0);
  return Number.isSafeInteger(v) && v > 0 ? v : 0;
}

function holdTtlMs(gw: GatewayContext): number {
  const v = Number(gw.env.get('BALANCE_HOLD_TTL_SECONDS') ?? DEFAULT_HOLD_TTL_S);
  return (Number.isFinite(v) && v > 0 ? v : DEFAULT_HOLD_TTL_S) * 1000;
}

export function insufficient(needed: number, available?: number): GatewayError {
  const have = available === undefined ? '' : ` (available: ${available} credits)`;
  return new GatewayError(
    402,
    'insufficient_credits',
    `This call needs up to ${needed} credits (${usdOf(needed)} USD)${have}. Top up the balance and try again.`,
  );
}

type Close = 'settle' | 'release' | 'expire';

export class LedgerBilling implements Billing {
  readonly gw: GatewayContext;
  #lastSweep = 0;
  #stopped = false;
  /** Wakes the pauses of pending retries (on stop). */
  #wakers = new Set<() => void>();

  constructor(gw: GatewayContext) {
    this.gw = gw;
  }

  get db(): Db {
    return this.gw.db;
  }

  async reserve(a: { cityId: string; userId: string; credits: number; requestId: string; model: string; mode: string }): Promise<Hold> {
    this.#maybeSweep();
    const credits = Math.max(0, Math.ceil(a.credits));
    if (!Number.isSafeInteger(credits)) throw insufficient(a.credits);
    const holdId = newId('hold', 12);
    if (credits === 0) return { id: holdId, cityId: a.cityId, userId: a.userId, credits: 0 };
    await checkBudget(this.gw, { cityId: a.cityId, userId: a.userId, credits }); // 402 budget_exceeded (issue 15)
    const at = Date.now();
    const entryId = newEntryId();
    const db = this.db;
    const res = await db.batch([
      ...openStatements(db, a.cityId, a.userId, initialGrant(this.gw), at),
      ...moveStatements(db, {
        entryId,
        key: `hold:${holdId}`,
        cityId: a.cityId,
        userId: a.userId,
        kind: 'hold',
        delta: sql`${-credits}`,
        guard: sql`b.credits - b.leased >= ${credits}`, // leased credits belong to other processes' leases
        ref: holdId,
        requestId: a.requestId,
        model: a.model,
        at,
      }),
      sql`INSERT INTO holds (hold_id, city_id, user_id, request_id, model, mode, credits, status, created_at)
        SELECT ${holdId}, ${a.cityId}, ${a.userId}, ${a.requestId}, ${a.model}, ${a.mode}, ${credits}, 'held', ${at}
        WHERE EXISTS (SELECT 1 FROM ledger WHERE entry_id = ${entryId})`.compile(db.kysely),
    ]);
    if (lowAlertWritten(res, OPEN_LEN)) this.gw.waitUntil(dispatchSoon(this.gw)); // balance.low (Workers: no poller)
    if (res[OPEN_LEN].changes !== 1) {
      const row = await db.kysely
        .selectFrom('balances')
        .select(['credits', 'leased'])
        .where('city_id', '=', a.cityId)
        .where('user_id', '=', a.userId)
        .executeTakeFirst();
      throw insufficient(credits, Math.max(0, (row?.credits ?? 0) - (row?.leased ?? 0)));
    }
    return { id: holdId, cityId: a.cityId, userId: a.userId, credits };
  }

  /**
   * Charges `credits` (the measured cost) and returns the rest of the hold; exactly once. A
   * write that fails is retried in the background until it commits (closing is idempotent:
   * `close:<hold>`); if the process stops first, the sweeper settles the hold at the cost in
   * the call's usage record instead of returning it (sweep()).
   */
  async settle(hold: Hold, credits: number): Promise<void> {
    await this.#closeOrRetry(hold, 'settle', Math.max(0, Math.ceil(credits)));
  }

  async release(hold: Hold): Promise<void> {
    await this.#closeOrRetry(hold, 'release', 0);
  }

  async #closeOrRetry(hold: Hold, how: 'settle' | 'release', cost: number): Promise<void> {
    try {
      await this.close(hold, how, cost);
    } catch (e) {
      if (!this.gw.databaseDown(e)) this.gw.log('warn', `billing: ${how} failed, retrying`, { hold: hold.id, cost, error: String(e) });
      this.gw.waitUntil(this.#retry(hold, how, cost));
    }
  }

  async #retry(hold: Hold, how: 'settle' | 'release', cost: number): Promise<void> {
    let error: unknown;
    for (const ms of RETRY_MS) {
      await this.#pause(ms);
      if (this.#stopped) break;
      try {
        await this.close(hold, how, cost);
        this.gw.log('info', `billing: ${how} committed on a retry`, { hold: hold.id, cost });
        return;
      } catch (e) {
        error = e;
      }
    }
    // Not lost: the sweeper settles the hold from the call's usage record once its TTL passes.
    this.gw.log('error', `billing: ${how} still failing; left to the sweeper`, { hold: hold.id, cost, error: String(error ?? 'stopping') });
  }

  #pause(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wakers.add(done);
    });
  }

  /** Graceful stop: pending retries give up at once (the sweeper finishes them after a restart). */
  stop(): void {
    this.#stopped = true;
    for (const wake of [...this.#wakers]) wake();
  }

  /**
   * Closes a hold. The ledger row comes first, guarded by the hold's state and keyed
   * `close:<hold>` (held → settled | released | expired: at most one of them, even if two
   * dialects' isolation let two guards pass, the UNIQUE key lets one batch commit); the hold's
   * state follows only if that row exists. The charge is capped by what the hold and the
   * balance can cover, so it never drives a balance negative. A settle that finds its hold
   * expired by the sweeper charges from the balance instead (`late:<hold>`, once).
   */
  async close(hold: Hold, how: Close, cost: number): Promise<boolean> {
    const db = this.db;
    if (hold.credits === 0) {
      // A free reservation (nothing priced when reserved): charge a late cost, if any, from the balance.
      if (how !== 'settle' || cost === 0) return false;
      const at = Date.now();
      const res = await db
        .batch([
          ...openStatements(db, hold.cityId, hold.userId, initialGrant(this.gw), at),
          ...moveStatements(db, {
            entryId: newEntryId(),
            key: `late:${hold.id}`,
            cityId: hold.cityId,
            userId: hold.userId,
            kind: 'settle',
            delta: sql`-${least(db, cost, sql`b.credits`)}`,
            ref: hold.id,
            at,
          }),
        ])
        .catch((e) => (isUniqueViolation(e) ? null : Promise.reject(e)));
      if (lowAlertWritten(res, OPEN_LEN)) this.gw.waitUntil(dispatchSoon(this.gw));
      return !!res && res[OPEN_LEN].changes === 1;
    }
    const to = how === 'settle' ? 'settled' : how === 'release' ? 'released' : 'expired';
    const attempt = async (late: boolean): Promise<boolean> => {
      const at = Date.now();
      const entryId = newEntryId();
      const delta =
        how !== 'settle' ? sql`h.credits` : late ? sql`-${least(db, cost, sql`b.credits`)}` : sql`h.credits - ${least(db, cost, sql`h.credits + b.credits`)}`;
      const res = await db
        .batch([
          ...moveStatements(db, {
            entryId,
            key: `${late ? 'late' : 'close'}:${hold.id}`,
            cityId: hold.cityId,
            userId: hold.userId,
            kind: how,
            join: sql`JOIN holds h ON h.hold_id = ${hold.id} AND h.city_id = b.city_id AND h.user_id = b.user_id`,
            guard: sql`h.status = ${late ? 'expired' : 'held'}`,
            delta,
            ref: hold.id,
            at,
          }),
          sql`UPDATE holds SET status = ${to}, cost = ${how === 'settle' ? cost : null}, closed_entry = ${entryId}, closed_at = ${at}
            WHERE hold_id = ${hold.id} AND EXISTS (SELECT 1 FROM ledger WHERE entry_id = ${entryId})`.compile(db.kysely),
        ])
        .catch((e) => (isUniqueViolation(e) ? null : Promise.reject(e)));
      if (lowAlertWritten(res, 0)) this.gw.waitUntil(dispatchSoon(this.gw));
      return !!res && res[0].changes === 1;
    };
    if (await attempt(false)) return true;
    return how === 'settle' ? attempt(true) : false;
  }

  /**
   * Closes holds older than the hold TTL. A hold whose call finished (its usage record, same
   * request id, carries the measured cost) but whose settle never committed — the write
   * failed and the process died before a retry did — is settled at that cost; the others
   * (their request died with its process) are returned.
   */
  async sweep(now = Date.now()): Promise<number> {
    this.#lastSweep = now;
    const stale = await this.db.kysely
      .selectFrom('holds')
      .select(['hold_id', 'city_id', 'user_id', 'credits'])
      .select((eb) =>
        eb
          .selectFrom('usage')
          .select('usage.credits')
          .whereRef('usage.request_id', '=', 'holds.request_id')
          .whereRef('usage.city_id', '=', 'holds.city_id')
          .whereRef('usage.user_id', '=', 'holds.user_id')
          .orderBy('usage.seq', 'desc')
          .limit(1)
          .as('measured'),
      )
      .where('status', '=', 'held')
      .where('created_at', '<', now - holdTtlMs(this.gw))
      .limit(500)
      .execute();
    let expired = 0;
    let settled = 0;
    for (const h of stale) {
      const hold = { id: h.hold_id, cityId: h.city_id, userId: h.user_id, credits: h.credits };
      if (h.measured !== null && h.measured !== undefined) {
        if (await this.close(hold, 'settle', Math.max(0, Math.ceil(Number(h.measured))))) settled++;
      } else if (await this.close(hold, 'expire', 0)) expired++;
    }
    if (expired > 0) this.gw.log('warn', 'expired stale credit holds', { count: expired });
    if (settled > 0) this.gw.log('warn', 'settled stale credit holds from their usage records', { count: settled });
    return expired + settled;
  }

  #maybeSweep(): void {
    const now = Date.now();
    // Never wait longer than a hold lives: a hold that outlives its TTL is returned promptly.
    if (now - this.#lastSweep < Math.min(SWEEP_EVERY_MS, holdTtlMs(this.gw))) return;
    this.#lastSweep = now;
    this.gw.waitUntil(this.sweep(now));
  }
}
