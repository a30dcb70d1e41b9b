// Refunds and disputes: Stripe's charge.refunded and charge.dispute.created, Creem's
// refund.created. Each debits the credits the payment bought (in proportion to the amount
// refunded), exactly once however often the event is delivered, and never below zero: what
// the balance cannot cover is recorded as the refund's shortfall, which admins see in
// payment/refunds.
//
// One batch per refund: the ledger debit (idempotency key `refund:<refund key>`, so a replay
// fails on the UNIQUE key and changes nothing) and the refund row, which reads back what the
// debit actually took.
import { sql } from 'kysely';
import type Stripe from 'stripe';
import { z } from 'zod';
import { isUniqueViolation, least } from '../../db/database.ts';
import type { PaymentsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import type { Identity } from '../../kernel/identity.ts';
import { action, pageQuery } from '../../kernel/service.ts';
import { moveStatements, newEntryId } from '../balance/ledger.ts';
import { dispatchSoon } from '../webhooks/dispatch.ts';
import { eventStatement } from '../webhooks/events.ts';
import { scopeCity } from '../balance/index.ts';
import { cityIdSchema } from '../cities/index.ts';
import type { MethodId } from './provider.ts';

/** What a verified refund or dispute event says. */
export interface RefundFacts {
  /** Unique per refund (Stripe: the charge and its cumulative refunded amount; a dispute id; a Creem refund id). */
  key: string;
  kind: 'refund' | 'dispute';
  paymentId: string | null;
  /** The checkout's id at the provider (our provider_ref). */
  ref: string | null;
  /** Minor units refunded by this event; with `cumulative`, the charge's total refunded so far. */
  amount: number;
  cumulative?: boolean;
  currency: string | null;
}

export type RefundOutcome = 'refunded' | 'already_refunded' | 'unknown_payment' | 'not_credited' | 'no_change';

/** The credits due for refunding `amount` of a payment, capped by what it bought minus what was already taken back. */
function creditsDue(p: PaymentsTable, amount: number, alreadyDue: number): number {
  // What the payment actually credited (an underpaid checkout credits less than it asked for).
  const bought = p.credited ?? p.credits;
  const paid = p.amount_paid ?? p.amount;
  const proportional = paid > 0 ? Math.round((bought * Math.min(amount, paid)) / paid) : bought;
  return Math.max(0, Math.min(bought - alreadyDue, proportional));
}

export async function applyRefund(gw: GatewayContext, provider: MethodId, f: RefundFacts, eventId: string, find: (paymentId: string | null, ref: string | null) => Promise<PaymentsTable | undefined>): Promise<{ outcome: RefundOutcome; paymentId: string | null; shortfall?: number }> {
  const p = await find(f.paymentId, f.ref);
  if (!p) return { outcome: 'unknown_payment', paymentId: f.paymentId };
  if (p.status !== 'paid') return { outcome: 'not_credited', paymentId: p.payment_id };
  const db = gw.db;
  const key = `${provider}:${f.key}`;
  const seen = await db.kysely.selectFrom('payment_refunds').select('refund_key').where('refund_key', '=', key).executeTakeFirst();
  if (seen) return { outcome: 'already_refunded', paymentId: p.payment_id };
  const prior = await db.kysely
    .selectFrom('payment_refunds')
    .select([sql<number>`COALESCE(SUM(credits_due), 0)`.as('due'), sql<number>`COALESCE(SUM(CASE WHEN kind = 'refund' THEN amount ELSE 0 END), 0)`.as('refunded')])
    .where('payment_id', '=', p.payment_id)
    .executeTakeFirst();
  const amount = f.cumulative ? f.amount - Number(prior?.refunded ?? 0) : f.amount;
  if (amount <= 0) return { outcome: 'no_change', paymentId: p.payment_id };
  const due = creditsDue(p, amount, Number(prior?.due ?? 0));
  const at = Date.now();
  const entryId = newEntryId();
  try {
    await db.batch([
      ...moveStatements(db, {
        entryId,
        key: `refund:${key}`,
        cityId: p.city_id,
        userId: p.user_id,
        kind: 'adjust',
        delta: sql`-${least(db, due, sql`b.credits`)}`,
        ref: p.payment_id,
        reason: `${f.kind} ${provider === 'a' ? 'stripe' : 'creem'} ${f.key}`,
        actor: 'system',
        at,
      }),
      sql`INSERT INTO payment_refunds (refund_key, payment_id, city_id, user_id, provider, kind, amount, currency, credits_due, credits_debited, shortfall, event_id, entry_id, created_at)
        SELECT ${key}, ${p.payment_id}, ${p.city_id}, ${p.user_id}, ${provider}, ${f.kind}, ${amount}, ${f.currency}, ${due}, -l.credits, ${due} + l.credits, ${eventId}, ${entryId}, ${at}
        FROM ledger l WHERE l.entry_id = ${entryId}`.compile(db.kysely),
      eventStatement(db, {
        type: f.kind === 'dispute' ? 'payment.disputed' : 'payment.refunded',
        cityId: p.city_id,
        userId: p.user_id,
        data: { payment_id: p.payment_id, provider: provider === 'a' ? 'stripe' : 'creem', amount, currency: f.currency, credits_due: due },
        at,
        when: sql`EXISTS (SELECT 1 FROM ledger WHERE entry_id = ${entryId})`,
      }),
    ]);
    gw.waitUntil(dispatchSoon(gw));
  } catch (e) {
    if (isUniqueViolation(e)) return { outcome: 'already_refunded', paymentId: p.payment_id };
    throw e;
  }
  const row = await db.kysely.selectFrom('payment_refunds').select('shortfall').where('refund_key', '=', key).executeTakeFirst();
  const shortfall = Number(row?.shortfall ?? 0);
  if (shortfall > 0) gw.log('warn', 'refund exceeds the balance: shortfall recorded', { payment_id: p.payment_id, refund: key, shortfall });
  return { outcome: 'refunded', paymentId: p.payment_id, shortfall };
}

/** Stripe: charge.refunded (a Charge, cumulative amount_refunded) and charge.dispute.created (a Dispute). */
export async function stripeRefundFacts(stripe: Stripe, event: Stripe.Event): Promise<RefundFacts | null> {
  const o = event.data.object as unknown as Record<string, unknown>;
  let f: Omit<RefundFacts, 'ref' | 'paymentId'> & { pi: string | null; meta: Record<string, string> } | null = null;
  if (event.type === 'charge.refunded' && o.object === 'charge') {
    const total = Number(o.amount_refunded ?? 0);
    f = { key: `${String(o.id)}:${total}`, kind: 'refund', amount: total, cumulative: true, currency: (o.currency as string) ?? null, pi: (o.payment_intent as string) ?? null, meta: (o.metadata as Record<string, string>) ?? {} };
  } else if (event.type === 'charge.dispute.created' && o.object === 'dispute') {
    f = { key: String(o.id), kind: 'dispute', amount: Number(o.amount ?? 0), currency: (o.currency as string) ?? null, pi: (o.payment_intent as string) ?? null, meta: (o.metadata as Record<string, string>) ?? {} };
  }
  if (!f) return null;
  // The charge names its PaymentIntent; the Checkout Session that made it is our payment.
  let ref: string | null = null;
  if (f.pi) {
    const sessions = await stripe.checkout.sessions.list({ payment_intent: f.pi, limit: 1 });
    ref = sessions.data[0]?.id ?? null;
  }
  const { pi: _pi, meta, ...rest } = f;
  return { ...rest, ref, paymentId: meta.payment_id ?? null };
}

/** Creem: refund.created (a refund object naming its checkout, order and transaction). */
export function creemRefundFacts(type: string, o: Record<string, unknown>): RefundFacts | null {
  if (type !== 'refund.created') return null;
  const checkout = (o.checkout && typeof o.checkout === 'object' ? o.checkout : {}) as Record<string, unknown>;
  const meta = (checkout.metadata && typeof checkout.metadata === 'object' ? checkout.metadata : {}) as Record<string, unknown>;
  const paymentId = typeof checkout.request_id === 'string' ? checkout.request_id : typeof meta.payment_id === 'string' ? meta.payment_id : null;
  return {
    key: String(o.id ?? ''),
    kind: 'refund',
    paymentId,
    ref: typeof checkout.id === 'string' ? checkout.id : null,
    amount: Number(o.refund_amount ?? 0),
    currency: typeof o.refund_currency === 'string' ? o.refund_currency.toLowerCase() : null,
  };
}

/** payment/refunds: refunds and disputes with what they debited and any shortfall (admin; a bureau its city). */
export const refundsAction = action({
  method: 'GET',
  auth: ['admin', 'bureau'],
  summary: 'Refunds and disputes: credits debited for each, and the shortfall the balance could not cover',
  input: z.object({ city_id: cityIdSchema.optional(), payment_id: z.string().max(100).optional(), shortfall_only: z.enum(['true', 'false']).optional(), ...pageQuery }),
  handler: async ({ gateway, identity, input }) => {
    let q = gateway.db.kysely.selectFrom('payment_refunds').selectAll();
    const cityId = scopeCity(identity as Identity, input.city_id);
    if (cityId) q = q.where('city_id', '=', cityId);
    if (input.payment_id) q = q.where('payment_id', '=', input.payment_id);
    if (input.shortfall_only === 'true') q = q.where('shortfall', '>', 0);
    const rows = await q.orderBy('created_at', 'desc').limit(input.limit).execute();
    return {
      items: rows.map((r) => ({
        payment_id: r.payment_id,
        city_id: r.city_id,
        user_id: r.user_id,
        provider: r.provider === 'a' ? 'stripe' : 'creem',
        kind: r.kind,
        refund: r.refund_key.slice(2),
        amount: r.amount,
        currency: r.currency,
        credits_due: r.credits_due,
        credits_debited: r.credits_debited,
        shortfall: r.shortfall,
        created_at: new Date(r.created_at).toISOString(),
      })),
    };
  },
});
