// A user's subscription as the money path sees it: read once and kept in memory for a few
// seconds (no database read per call), with its plan and its current paid period.
import type { GatewayContext } from '../../kernel/context.ts';
import type { WindowSpec } from '../../kernel/windows.ts';
import type { CityLimits } from '../../kernel/city-settings.ts';
import type { SubscriptionsTable } from '../../db/schema.ts';
import { toPlan, windowsOf, type Plan } from './schema.ts';

/** How long a process trusts what it read (another process's change shows within this). */
export const SUB_CACHE_MS = 5000;
/** A past-due subscription keeps serving this long after the failed payment (PLANS_PAST_DUE_GRACE_HOURS). */
export const DEFAULT_GRACE_H = 72;

export interface LiveSub {
  row: SubscriptionsTable;
  plan: Plan;
  /** The paid period covering now, if any. */
  period: { start: number; end: number; credits: number } | null;
  /** The windows its calls must fit (one array per period: the engine keeps its slices by it). */
  windows: WindowSpec[];
  scope: string;
  models: Set<string> | null;
  /** The plan's rate limits (they replace the city's user_* limits), or undefined. */
  limits: CityLimits | undefined;
}

export function graceMs(gw: GatewayContext): number {
  const h = Number(gw.env.get('PLANS_PAST_DUE_GRACE_HOURS') ?? DEFAULT_GRACE_H);
  return (Number.isFinite(h) && h >= 0 ? h : DEFAULT_GRACE_H) * 3_600_000;
}

/** Reads the live subscription of a user (with its plan and the period covering `now`), or null. */
export async function readLive(gw: GatewayContext, cityId: string, userId: string, now: number): Promise<LiveSub | null> {
  const row = await gw.db.kysely.selectFrom('subscriptions').selectAll().where('city_id', '=', cityId).where('user_id', '=', userId).where('live', '=', 1).executeTakeFirst();
  if (!row) return null;
  const plan = await gw.db.kysely.selectFrom('plans').selectAll().where('plan_id', '=', row.plan_id).executeTakeFirst();
  if (!plan) return null;
  // The latest paid period that has begun (an upgrade's invoice starts a new one mid-period).
  const p = await gw.db.kysely
    .selectFrom('subscription_periods')
    .selectAll()
    .where('subscription_id', '=', row.subscription_id)
    .where('period_start', '<=', now)
    .orderBy('period_start', 'desc')
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  // It serves until its end; a past-due subscription keeps what is left of it through the grace
  // (the renewal's payment is being retried). A refunded or disputed invoice takes its period's
  // credits back: nothing more is allowed in it.
  const until = p ? (row.status === 'past_due' && row.past_due_since !== null ? Math.max(Number(p.period_end), Number(row.past_due_since) + graceMs(gw)) : Number(p.period_end)) : 0;
  const period = p && now < until ? { start: Number(p.period_start), end: until, credits: Number(p.revoked) ? 0 : Number(p.credits) } : null;
  const P = toPlan(plan);
  return {
    row,
    plan: P,
    period,
    windows: period ? windowsOf(P, period) : [],
    scope: `sub:${row.subscription_id}`,
    models: P.models ? new Set(P.models) : null,
    limits: (P.limits as CityLimits | null) ?? undefined,
  };
}

/** Per-process cache of live subscriptions, by user; invalidated here on every change this process makes. */
export class SubscriptionCache {
  readonly gw: GatewayContext;
  readonly now: () => number;
  #users = new Map<string, { at: number; sub: LiveSub | null; loading?: Promise<LiveSub | null> }>();
  /** Cities with no live subscription at all: no per-user read for their users. */
  #cities = new Map<string, { at: number; any: boolean; loading?: Promise<boolean> }>();

  constructor(gw: GatewayContext, now: () => number) {
    this.gw = gw;
    this.now = now;
  }

  /** The user's live subscription, or null (from memory when read within SUB_CACHE_MS). */
  async get(cityId: string, userId: string): Promise<LiveSub | null> {
    const t = Date.now();
    let c = this.#cities.get(cityId);
    let any: boolean;
    if (c && t - c.at <= SUB_CACHE_MS) any = c.any;
    else if (c?.loading) any = await c.loading;
    else {
      const entry: { at: number; any: boolean; loading?: Promise<boolean> } = { at: c?.at ?? 0, any: c?.any ?? false };
      // Every caller waiting on this read gets its answer from the promise itself.
      entry.loading = this.gw.db.kysely
        .selectFrom('subscriptions')
        .select('subscription_id')
        .where('city_id', '=', cityId)
        .where('live', '=', 1)
        .limit(1)
        .executeTakeFirst()
        .then((r) => {
          entry.any = !!r;
          entry.at = Date.now();
          return entry.any;
        })
        .finally(() => (entry.loading = undefined));
      this.#cities.set(cityId, (c = entry));
      any = await entry.loading;
    }
    if (!any) return null;
    const key = `${cityId}\n${userId}`;
    let u = this.#users.get(key);
    const now = this.now();
    const stale = u && (t - u.at > SUB_CACHE_MS || (u.sub?.period && now >= u.sub.period.end));
    if (!u || stale) {
      if (u?.loading) return u.loading;
      const loading = readLive(this.gw, cityId, userId, now);
      const entry: { at: number; sub: LiveSub | null; loading?: Promise<LiveSub | null> } = { at: u?.at ?? 0, sub: u?.sub ?? null, loading };
      this.#users.set(key, entry);
      try {
        entry.sub = await loading;
        entry.at = Date.now();
      } finally {
        entry.loading = undefined;
      }
      if (this.#users.size > 100_000) this.#users.clear();
      return entry.sub;
    }
    return u.sub;
  }

  /** True when this city is known, read within SUB_CACHE_MS, to have no live subscription. */
  knownEmpty(cityId: string): boolean {
    const c = this.#cities.get(cityId);
    return !!c && !c.any && !c.loading && Date.now() - c.at <= SUB_CACHE_MS;
  }

  /** A subscriber's plan limits, from memory only (undefined when not known yet or none). */
  limitsOf(cityId: string, userId: string): CityLimits | undefined {
    if (!this.#cities.get(cityId)?.any) return undefined;
    const sub = this.#users.get(`${cityId}\n${userId}`)?.sub;
    if (!sub || (sub.row.status !== 'active' && sub.row.status !== 'past_due')) return undefined;
    return sub.limits;
  }

  forget(cityId: string, userId?: string): void {
    this.#cities.delete(cityId);
    if (userId !== undefined) this.#users.delete(`${cityId}\n${userId}`);
    else for (const k of this.#users.keys()) if (k.startsWith(`${cityId}\n`)) this.#users.delete(k);
  }
}
