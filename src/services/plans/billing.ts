// The charge order of a subscriber's call (issue 34): the plan's allowance within every window
// (and the paid period's credits), then the prepaid credits if the plan allows overflow, else
// 429 plan_window_exhausted naming the window and when it frees. Offered as the ALLOWANCE
// capability, which ai asks before the billing; null sends a call to the prepaid credits (a
// user with no live subscription, at once and without a promise).
import type { GatewayContext } from '../../kernel/context.ts';
import { GatewayError } from '../../kernel/errors.ts';
import type { Allowance, Billing, Hold } from '../../kernel/metering.ts';
import type { RollingWindows, WindowHold, WindowRefusal } from '../../kernel/windows.ts';
import { graceMs, SubscriptionCache, type LiveSub } from './subscriptions.ts';
import { windowExhausted } from './events.ts';

/** Each gateway's plan billing (its subscription cache is forgotten where a change is made). */
export const billings = new WeakMap<GatewayContext, PlanBilling>();
export const planBilling = (gw: GatewayContext) => billings.get(gw);

type PlanHold = Hold & { [k: symbol]: WindowHold | undefined };

export class PlanBilling implements Allowance {
  readonly gw: GatewayContext;
  readonly windows: RollingWindows;
  readonly subs: SubscriptionCache;
  readonly #key = Symbol('plan window hold');
  #seq = 0;

  constructor(gw: GatewayContext, windows: RollingWindows) {
    this.gw = gw;
    this.windows = windows;
    this.subs = new SubscriptionCache(gw, () => windows.now());
  }

  reserve(a: Parameters<Billing['reserve']>[0]): Promise<Hold | null> | null {
    // A city known (within SUB_CACHE_MS) to have no live subscription: credits, with no
    // promise on the hot path of a credits-only call.
    if (a.durable || this.subs.knownEmpty(a.cityId)) return null;
    return this.#reserve(a);
  }

  async #reserve(a: Parameters<Billing['reserve']>[0]): Promise<Hold | null> {
    const sub = await this.subs.get(a.cityId, a.userId);
    // Jobs' holds outlive the process (a window slice lives in memory): they draw on credits.
    if (!sub) return null;
    const now = this.windows.now();
    if (sub.row.status === 'past_due' && sub.row.past_due_since !== null && now - Number(sub.row.past_due_since) > graceMs(this.gw)) {
      throw new GatewayError(402, 'subscription_past_due', 'The subscription’s last payment failed and its grace period is over: update the payment method (plans/portal) to continue.');
    }
    if (sub.row.status !== 'active' && sub.row.status !== 'past_due') return null;
    if (!sub.period) return this.#overflow(sub, null);
    if (sub.models && !sub.models.has(a.model)) {
      if (sub.plan.overflow) return null;
      throw new GatewayError(403, 'model_not_in_plan', `The plan '${sub.plan.name}' does not include the model '${a.model}'.`, { param: 'model' });
    }
    const credits = Math.max(0, Math.ceil(a.credits));
    const r = await this.windows.reserve(sub.scope, sub.windows, credits);
    if ('refused' in r) return this.#overflow(sub, r);
    const hold: PlanHold = { id: `plan_${(this.#seq++).toString(36)}`, cityId: a.cityId, userId: a.userId, credits, planRemaining: r.remaining, planWindow: r.window };
    hold[this.#key] = r;
    return hold;
  }

  /** The plan cannot take the call: prepaid credits if the plan allows, else 429 naming the window. */
  #overflow(sub: LiveSub, r: WindowRefusal | null): null {
    if (r) windowExhausted(this.gw, sub, r);
    if (sub.plan.overflow) return null;
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

  settle(hold: Hold, credits: number): boolean {
    const wh = (hold as PlanHold)[this.#key];
    if (!wh) return false;
    (hold as PlanHold)[this.#key] = undefined;
    this.windows.settle(wh, credits);
    return true;
  }

  release(hold: Hold): boolean {
    const wh = (hold as PlanHold)[this.#key];
    if (!wh) return false;
    (hold as PlanHold)[this.#key] = undefined;
    this.windows.release(wh);
    return true;
  }
}
