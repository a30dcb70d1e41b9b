// User budgets (cities/update { user_budget: { credits, period } }): what one user may spend
// per UTC day or month. A separate step that the money path runs before it reserves credits
// (LedgerBilling.reserve): a reservation that would take the user's spending of the period
// past the budget is refused with 402 budget_exceeded before any upstream call.
//
// Spending = the net of the user's AI ledger rows since the period began (holds debited,
// settles/releases/expiries returning what was not used), so credits still held by calls in
// flight count as spent. The check is a read before the reservation batch, not part of it:
// calls made at the same instant can together pass the budget by at most their holds.
import { sql } from 'kysely';
import type { UserBudget } from '../../kernel/city-settings.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { GatewayError } from '../../kernel/errors.ts';
import { dispatchSoon } from '../webhooks/dispatch.ts';
import { budgetReachedStatements } from '../webhooks/events.ts';

const SPENDING_KINDS = ['hold', 'settle', 'release', 'expire', 'charge'] as const;

/** Start and end (epoch ms) of the budget period that contains `now` (UTC). */
export function periodOf(period: UserBudget['period'], now = Date.now()): { start: number; end: number } {
  const d = new Date(now);
  if (period === 'day') {
    const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
    return { start, end: start + 86_400_000 };
  }
  return { start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) };
}

export interface BudgetState {
  credits: number;
  period: UserBudget['period'];
  spent: number;
  remaining: number;
  resets_at: string;
}

/** The user's budget and what is left of it, or null when the city sets none. */
export async function budgetOf(gw: GatewayContext, cityId: string, userId: string): Promise<BudgetState | null> {
  const budget = (await gw.cities.settings(cityId)).user_budget;
  if (!budget) return null;
  const { start, end } = periodOf(budget.period);
  const row = await gw.db.kysely
    .selectFrom('ledger')
    .select(sql<number | null>`SUM(credits)`.as('net'))
    .where('city_id', '=', cityId)
    .where('user_id', '=', userId)
    .where('created_at', '>=', start)
    .where('kind', 'in', SPENDING_KINDS)
    .executeTakeFirst();
  const spent = Math.max(0, -Number(row?.net ?? 0));
  return { credits: budget.credits, period: budget.period, spent, remaining: Math.max(0, budget.credits - spent), resets_at: new Date(end).toISOString() };
}

/** Throws 402 budget_exceeded when reserving `credits` would pass the user's budget. */
export async function checkBudget(gw: GatewayContext, a: { cityId: string; userId: string; credits: number }): Promise<void> {
  const b = await budgetOf(gw, a.cityId, a.userId);
  if (!b || a.credits <= b.remaining) return;
  await budgetReached(gw, a.cityId, a.userId, b);
  throw new GatewayError(
    402,
    'budget_exceeded',
    `This call needs up to ${a.credits} credits but only ${b.remaining} of this user's ${b.period === 'day' ? 'daily' : 'monthly'} budget of ${b.credits} credits are left; it resets at ${b.resets_at}.`,
  );
}

/** budget.reached (webhooks): the first refusal in a period writes it, once per user and period. */
async function budgetReached(gw: GatewayContext, cityId: string, userId: string, b: BudgetState): Promise<void> {
  try {
    const at = Date.now();
    const data = { credits: b.credits, period: b.period, spent: b.spent, resets_at: b.resets_at };
    await gw.db.batch(budgetReachedStatements(gw.db, { cityId, userId, periodStart: periodOf(b.period, at).start, at, data }));
    gw.waitUntil(dispatchSoon(gw));
  } catch (e) {
    if (!gw.databaseDown(e)) gw.log('warn', 'webhooks: could not write budget.reached', { error: String(e) });
  }
}
