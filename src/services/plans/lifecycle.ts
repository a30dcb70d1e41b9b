// The state changes of a subscription, each one batch. A provider's event is applied once: the
// batch begins with its row in subscription_events (primary key: provider and event id), so a
// replay or a concurrent duplicate fails there and changes nothing. A period is granted once
// per invoice (subscription_periods' primary key), whichever event brings it.
//
//   incomplete ─checkout completed─▶ active ─invoice.paid─▶ active (a period granted)
//   active ─payment failed─▶ past_due ─(grace, PLANS_PAST_DUE_GRACE_HOURS)─▶ calls refused
//   past_due ─invoice.paid─▶ active
//   active ─updated: cancel at period end─▶ active (canceling) ─deleted─▶ ended (credits only)
import { sql, type CompiledQuery } from 'kysely';
import { isUniqueViolation } from '../../db/database.ts';
import type { SubscriptionsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { WINDOWS, type RollingWindows } from '../../kernel/windows.ts';
import { dispatchSoon } from '../webhooks/dispatch.ts';
import { eventStatement, type EventType } from '../webhooks/events.ts';

type Compiler = GatewayContext['db']['kysely'];

export type Outcome = 'applied' | 'replayed' | 'unknown_subscription' | 'ignored';

export interface Change {
  /** The provider event applying it (null: an action of the admin or bureau). */
  event: { provider: string; id: string; type: string } | null;
  subscriptionId: string;
  statements: (k: Compiler, at: number) => CompiledQuery[];
  /** A webhook event to emit when the change applies. */
  emit?: { type: EventType; data: Record<string, unknown> };
}

/** Applies a change once; 'replayed' when its event was applied before. */
export async function apply(gw: GatewayContext, sub: SubscriptionsTable, c: Change): Promise<Outcome> {
  const db = gw.db;
  const at = gw.use<RollingWindows>(WINDOWS)?.now() ?? Date.now(); // the windows' clock (tests move it)
  const statements: CompiledQuery[] = [];
  if (c.event) {
    statements.push(
      sql`INSERT INTO subscription_events (provider, event_id, type, subscription_id, outcome, created_at)
        VALUES (${c.event.provider}, ${c.event.id}, ${c.event.type}, ${c.subscriptionId}, 'applied', ${at})`.compile(db.kysely),
    );
  }
  statements.push(...c.statements(db.kysely, at));
  if (c.emit) statements.push(eventStatement(db, { type: c.emit.type, cityId: sub.city_id, userId: sub.user_id, data: { subscription_id: sub.subscription_id, ...c.emit.data }, at }));
  try {
    await db.batch(statements);
  } catch (e) {
    if (c.event && isUniqueViolation(e)) {
      const seen = await db.kysely.selectFrom('subscription_events').select('event_id').where('provider', '=', c.event.provider).where('event_id', '=', c.event.id).executeTakeFirst();
      if (seen) return 'replayed';
    }
    throw e;
  }
  if (c.emit) gw.waitUntil(dispatchSoon(gw));
  return 'applied';
}

/** Records an event that changes nothing (so a replay is known as one too). */
export async function recordIgnored(gw: GatewayContext, provider: string, id: string, type: string, outcome: Outcome, subscriptionId: string | null): Promise<void> {
  await gw.db.kysely
    .insertInto('subscription_events')
    .values({ provider, event_id: id, type, subscription_id: subscriptionId, outcome, created_at: Date.now() })
    .onConflict((oc) => oc.doNothing())
    .execute();
}

export const activate = (subId: string, refs: { provider_ref?: string | null; customer_ref?: string | null }) => (k: Compiler, at: number) => [
  sql`UPDATE subscriptions SET status = CASE WHEN status = 'incomplete' THEN 'active' ELSE status END, live = 1,
      provider_ref = COALESCE(${refs.provider_ref ?? null}, provider_ref), customer_ref = COALESCE(${refs.customer_ref ?? null}, customer_ref), updated_at = ${at}
    WHERE subscription_id = ${subId} AND status IN ('incomplete', 'active', 'past_due')`,
].map((q) => q.compile(k));

/** The period an invoice paid for: its credits (once per invoice), the subscription active and current. */
export function grantPeriod(subId: string, p: { invoice: string; start: number; end: number; credits: number }) {
  return (k: Compiler, at: number) =>
    [
      sql`INSERT INTO subscription_periods (subscription_id, invoice_ref, period_start, period_end, credits, revoked, created_at)
        VALUES (${subId}, ${p.invoice}, ${p.start}, ${p.end}, ${p.credits}, 0, ${at}) ON CONFLICT (subscription_id, invoice_ref) DO NOTHING`,
      sql`UPDATE subscriptions SET status = 'active', live = 1, past_due_since = NULL,
          period_start = ${p.start}, period_end = ${p.end}, updated_at = ${at}
        WHERE subscription_id = ${subId} AND status IN ('incomplete', 'active', 'past_due')`,
    ].map((q) => q.compile(k));
}

export const pastDue = (subId: string) => (k: Compiler, at: number) => [
  sql`UPDATE subscriptions SET status = 'past_due', past_due_since = COALESCE(past_due_since, ${at}), updated_at = ${at}
    WHERE subscription_id = ${subId} AND status IN ('active', 'past_due')`,
].map((q) => q.compile(k));

export const updated = (subId: string, u: { planId?: string | null; cancelAtPeriodEnd: boolean; periodEnd?: number | null }) => (k: Compiler, at: number) => [
  sql`UPDATE subscriptions SET plan_id = COALESCE(${u.planId ?? null}, plan_id), cancel_at_period_end = ${u.cancelAtPeriodEnd ? 1 : 0},
      period_end = COALESCE(${u.periodEnd ?? null}, period_end), updated_at = ${at}
    WHERE subscription_id = ${subId} AND status IN ('incomplete', 'active', 'past_due')`,
].map((q) => q.compile(k));

export const ended = (subId: string) => (k: Compiler, at: number) => [
  sql`UPDATE subscriptions SET status = 'ended', live = NULL, cancel_at_period_end = 0, updated_at = ${at} WHERE subscription_id = ${subId} AND status <> 'ended'`,
].map((q) => q.compile(k));

/** A refunded or disputed invoice: its period allows nothing more. */
export const revokePeriod = (subId: string, invoice: string) => (k: Compiler, at: number) => [
  sql`UPDATE subscription_periods SET revoked = 1 WHERE subscription_id = ${subId} AND invoice_ref = ${invoice}`,
  sql`UPDATE subscriptions SET updated_at = ${at} WHERE subscription_id = ${subId}`,
].map((q) => q.compile(k));

