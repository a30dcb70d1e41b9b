// The charge order of a subscriber's call (issue 34): the plan's allowance within every window
// (and the paid period's credits), then the prepaid credits if the plan allows overflow, else
// 429 plan_window_exhausted naming the window and when it frees. Wraps the balance service's
// billing capability; a user with no live subscription goes straight to it.
import type { GatewayContext } from '../../kernel/context.ts';
import { GatewayError } from '../../kernel/errors.ts';
import type { Billing, Hold } from '../../kernel/metering.ts';
import type { RollingWindows, WindowHold, WindowRefusal } from '../../kernel/windows.ts';
import { graceMs, SubscriptionCache, type LiveSub } from './subscriptions.ts';
import { windowExhausted } from './events.ts';

/** Each gateway's plan billing (its subscription cache is forgotten where a change is made). */
export const billings = new WeakMap<GatewayContext, PlanBilling>();
export const planBilling = (gw: GatewayContext) => billings.get(gw);

const DONE = Promise.resolve();

type PlanHold = Hold & { [k: symbol]: WindowHold | undefined };

export class PlanBilling implements Billing {
  readonly gw: GatewayContext;
  readonly inner: Billing;
  readonly windows: RollingWindows;
  readonly subs: SubscriptionCache;
  readonly #key = Symbol('plan window hold');
  #seq = 0;

  constructor(gw: GatewayContext, inner: Billing, windows: RollingWindows) {
    this.gw = gw;
    this.inner = inner;
    this.windows = windows;
    this.subs = new SubscriptionCache(gw, () => windows.now());
  }

  reserve(a: { cityId: string; userId: string; credits: number; requestId: string; model: string; mode: string; durable?: boolean }): Promise<Hold> {
    // A city known (within SUB_CACHE_MS) to have no live subscription: straight to credits, no
    // extra promise on the hot path of a credits-only call.
    if (this.subs.knownEmpty(a.cityId)) return this.inner.reserve(a);
    return this.#reserve(a);
  }

  async #reserve(a: Parameters<Billing['reserve']>[0]): Promise<Hold> {
    const sub = await this.subs.get(a.cityId, a.userId);
    // Jobs' holds outlive the process (a window slice lives in memory): they draw on credits.
    if (!sub || a.durable) return this.inner.reserve(a);
    const now = this.windows.now();
    if (sub.row.status === 'past_due' && sub.row.past_due_since !== null && now - Number(sub.row.past_due_since) > graceMs(this.gw)) {
      throw new GatewayError(402, 'subscription_past_due', 'The subscription’s last payment failed and its grace period is over: update the payment method (plans/portal) to continue.');
    }
    if (sub.row.status !== 'active' && sub.row.status !== 'past_due') return this.inner.reserve(a);
    if (!sub.period) return this.#overflow(sub, a, null);
    if (sub.models && !sub.models.has(a.model)) {
      if (sub.plan.overflow) return this.inner.reserve(a);
      throw new GatewayError(403, 'model_not_in_plan', `The plan '${sub.plan.name}' does not include the model '${a.model}'.`, { param: 'model' });
    }
    const credits = Math.max(0, Math.ceil(a.credits));
    const r = await this.windows.reserve(sub.scope, sub.windows, credits);
    if ('refused' in r) return this.#overflow(sub, a, r);
    const hold: PlanHold = { id: `plan_${(this.#seq++).toString(36)}`, cityId: a.cityId, userId: a.userId, credits, planRemaining: r.remaining, planWindow: r.window };
    hold[this.#key] = r;
    return hold;
  }

  /** The plan cannot take the call: prepaid credits if the plan allows, else 429 naming the window. */
  #overflow(sub: LiveSub, a: Parameters<Billing['reserve']>[0], r: WindowRefusal | null): Promise<Hold> {
    if (r) windowExhausted(this.gw, sub, r);
    if (sub.plan.overflow) return this.inner.reserve(a);
    const w = r?.window;
    const retryS = r?.retryAfterMs ? Math.ceil(r.retryAfterMs / 1000) : sub.period ? Math.max(1, Math.ceil((sub.period.end - this.windows.now()) / 1000)) : null;
    const resets = r ? w!.resets_at : sub.period?.end ?? null;
    const what = w ? `its ${w.name} window (${w.used} of ${w.limit} credits used)` : 'its current period (not paid yet)';
    const when = resets ? `; it frees at ${new Date(resets).toISOString()}` : '';
    throw new GatewayError(429, 'plan_window_exhausted', `This call does not fit the plan's allowance: ${what}${when}.`, {
      param: w ? `window:${w.name}` : 'window:period',
      headers: retryS ? { 'retry-after': String(retryS) } : undefined,
    });
  }

  settle(hold: Hold, credits: number): Promise<void> {
    const wh = (hold as PlanHold)[this.#key];
    if (!wh) return this.inner.settle(hold, credits);
    (hold as PlanHold)[this.#key] = undefined;
    this.windows.settle(wh, credits);
    return DONE;
  }

  release(hold: Hold): Promise<void> {
    const wh = (hold as PlanHold)[this.#key];
    if (!wh) return this.inner.release(hold);
    (hold as PlanHold)[this.#key] = undefined;
    this.windows.release(wh);
    return DONE;
  }
}
