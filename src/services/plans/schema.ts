// What a plan is, as the actions take it and show it.
import { z } from 'zod';
import { cityLimitsSchema } from '../../kernel/city-settings.ts';
import type { WindowSpec } from '../../kernel/windows.ts';
import type { PlansTable } from '../../db/schema.ts';

const UNIT_S: Record<string, number> = { m: 60, h: 3600, d: 86_400, w: 604_800 };
/** A window's length: '5h', '1d', '7d', '30d', '90m', '2w', or seconds (≥ 60, at most a year). */
export const windowLength = z
  .union([z.number().int(), z.string().regex(/^\d{1,6}[mhdw]$/, "a length such as '5h', '7d', '90m' or a number of seconds")])
  .transform((v) => (typeof v === 'number' ? v : Number(v.slice(0, -1)) * UNIT_S[v.slice(-1)]))
  .refine((s) => s >= 60 && s <= 366 * 86_400, 'a window is 60 seconds to a year long');

const credits = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

export const windowInput = z.strictObject({ window: windowLength, limit: credits.describe('credits allowed in any such window') });

export const planFields = {
  name: z.string().trim().min(1).max(100),
  description: z.string().max(2000).optional(),
  interval: z.enum(['month', 'year']).describe('billing interval'),
  price: z.strictObject({
    amount: z.number().int().min(0).max(100_000_000).describe('minor units (cents) per interval'),
    currency: z.string().regex(/^[A-Za-z]{3}$/, 'a 3-letter ISO currency code').transform((c) => c.toLowerCase()),
  }),
  credits: credits.describe('credits included per period; unused credits expire at the period end'),
  windows: z.array(windowInput).max(10).optional().describe('rolling caps inside the period, e.g. [{ window: "5h", limit: 400000 }, { window: "7d", limit: 1500000 }]'),
  models: z.array(z.string().trim().min(1).max(256)).max(1000).nullable().optional().describe('the models the plan covers; null: all the city allows'),
  limits: cityLimitsSchema.nullable().optional().describe("rate limits that replace the city's for subscribers"),
  overflow: z.boolean().optional().describe("when the plan's allowance is used up: charge the prepaid credits (true, default) or refuse (429 plan_window_exhausted)"),
  stripe_price_id: z.string().regex(/^price_[A-Za-z0-9_]+$/, 'a Stripe price id (price_…)').nullable().optional().describe('a recurring Stripe price; absent: created through the API on the first subscribe'),
  creem_product_id: z.string().regex(/^prod_[A-Za-z0-9_]+$/, 'a Creem product id (prod_…)').nullable().optional(),
  order: z.number().int().min(0).max(10_000).optional().describe("position on the city's page"),
};

export const planIdSchema = z.string().regex(/^plan_[A-Za-z0-9_-]{6,40}$/, 'not a plan id');

export interface Plan {
  id: string;
  city_id: string;
  name: string;
  description: string;
  interval: 'month' | 'year';
  price: { amount: number; currency: string };
  credits: number;
  windows: { window: number; limit: number }[];
  models: string[] | null;
  limits: Record<string, number | null> | null;
  overflow: boolean;
  stripe_price_id: string | null;
  creem_product_id: string | null;
  order: number;
  status: 'active' | 'archived';
  created_at: string;
  updated_at: string;
}

export function toPlan(r: PlansTable): Plan {
  return {
    id: r.plan_id,
    city_id: r.city_id,
    name: r.name,
    description: r.description,
    interval: r.billing_interval,
    price: { amount: Number(r.amount), currency: r.currency },
    credits: Number(r.credits),
    windows: JSON.parse(r.windows) as Plan['windows'],
    models: r.models ? (JSON.parse(r.models) as string[]) : null,
    limits: r.limits ? (JSON.parse(r.limits) as Plan['limits']) : null,
    overflow: !!Number(r.overflow),
    stripe_price_id: r.stripe_price_id,
    creem_product_id: r.creem_product_id,
    order: Number(r.sort_order),
    status: r.status,
    created_at: new Date(Number(r.created_at)).toISOString(),
    updated_at: new Date(Number(r.updated_at)).toISOString(),
  };
}

const label = (s: number) => (s % 86_400 === 0 ? `${s / 86_400}d` : s % 3600 === 0 ? `${s / 3600}h` : s % 60 === 0 ? `${s / 60}m` : `${s}s`);

/** The windows a subscriber's calls must fit: the plan's rolling caps and the paid period's credits. */
export function windowsOf(plan: Plan, period: { start: number; end: number; credits: number }): WindowSpec[] {
  return [
    ...plan.windows.map((w) => ({ seconds: w.window, limit: w.limit, name: label(w.window) })),
    { since: period.start, until: period.end, limit: period.credits, name: 'period' },
  ];
}
