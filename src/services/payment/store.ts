// Payments: a pending top-up per checkout, credited exactly once.
//
// Crediting is one batch: the ledger row (key `payment:<id>`, guarded by the payment not being
// paid yet), the balance change, then the payment's move to 'paid' only if that row exists.
// Replays, concurrent duplicates and any order of paid / expired / failed events therefore
// credit at most once; expired and failed only move a payment that is still open, and paid
// wins over them (the money was taken). A checkout paid below its price is credited only the
// part paid for, and the shortfall is recorded on the payment (see creditFor).
import { sql } from 'kysely';
import { isUniqueViolation, type Db } from '../../db/database.ts';
import type { PaymentsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { dispatchSoon } from '../webhooks/dispatch.ts';
import { eventStatement } from '../webhooks/events.ts';
import { balanceGrant, moveStatements, newEntryId, openStatements } from '../balance/index.ts';
import type { Facts, MethodId } from './provider.ts';

export type Outcome =
  | 'credited'
  | 'already_paid'
  | 'expired'
  | 'failed'
  | 'no_change'
  | 'pending'
  | 'ignored'
  | 'unknown_payment'
  | 'ref_mismatch'
  | 'currency_mismatch';

export async function findPayment(db: Db, provider: MethodId, paymentId: string | null, ref: string | null): Promise<PaymentsTable | undefined> {
  if (paymentId) {
    const p = await db.kysely.selectFrom('payments').selectAll().where('payment_id', '=', paymentId).where('provider', '=', provider).executeTakeFirst();
    if (p) return p;
  }
  if (ref) return db.kysely.selectFrom('payments').selectAll().where('provider', '=', provider).where('provider_ref', '=', ref).executeTakeFirst();
  return undefined;
}

/**
 * What a paid checkout credits: the credits bought, or — when less than the price was paid
 * (a discount or coupon at the provider) — the part paid for at the checkout's own rate,
 * rounded down. Never more than was paid. `shortfall` is the unpaid part, in minor units.
 */
export function creditFor(p: Pick<PaymentsTable, 'credits' | 'amount'>, amountPaid: number | null | undefined): { credited: number; shortfall: number } {
  if (typeof amountPaid !== 'number' || !Number.isSafeInteger(amountPaid) || amountPaid >= p.amount || p.amount <= 0) return { credited: p.credits, shortfall: 0 };
  const paid = Math.max(0, amountPaid);
  return { credited: Number((BigInt(p.credits) * BigInt(paid)) / BigInt(p.amount)), shortfall: p.amount - paid };
}

export async function creditPayment(gw: GatewayContext, p: PaymentsTable, f: Facts, eventId: string | null): Promise<Outcome> {
  const db = gw.db;
  const at = Date.now();
  const entryId = newEntryId();
  const { credited, shortfall } = creditFor(p, f.amountPaid);
  try {
    const res = await db.batch([
      ...openStatements(db, p.city_id, p.user_id, balanceGrant(gw), at),
      ...moveStatements(db, {
        entryId,
        key: `payment:${p.payment_id}`,
        cityId: p.city_id,
        userId: p.user_id,
        kind: 'topup',
        join: sql`JOIN payments p ON p.payment_id = ${p.payment_id} AND p.city_id = b.city_id AND p.user_id = b.user_id`,
        guard: sql`p.status != 'paid'`,
        delta: sql`${credited}`,
        ref: p.payment_id,
        reason: `payment ${p.provider === 'a' ? 'stripe' : 'creem'} ${f.ref ?? p.provider_ref ?? ''}`.trim(),
        actor: 'system',
        at,
      }),
      sql`UPDATE payments SET status = 'paid', credit_entry = ${entryId}, event_id = ${eventId}, amount_paid = ${f.amountPaid ?? null},
          credited = ${credited}, shortfall = ${shortfall},
          provider_ref = COALESCE(provider_ref, ${f.ref}), paid_at = ${at}, updated_at = ${at}, error = NULL
        WHERE payment_id = ${p.payment_id} AND EXISTS (SELECT 1 FROM ledger WHERE entry_id = ${entryId})`.compile(db.kysely),
      eventStatement(db, {
        type: 'payment.succeeded',
        cityId: p.city_id,
        userId: p.user_id,
        data: { payment_id: p.payment_id, provider: p.provider === 'a' ? 'stripe' : 'creem', credits: credited, amount: f.amountPaid ?? p.amount, currency: p.currency },
        at,
        when: sql`EXISTS (SELECT 1 FROM ledger WHERE entry_id = ${entryId})`,
      }),
    ]);
    gw.waitUntil(dispatchSoon(gw));
    return res[res.length - 2].changes === 1 ? 'credited' : 'already_paid';
  } catch (e) {
    if (isUniqueViolation(e)) return 'already_paid';
    throw e;
  }
}

/** Applies verified facts to the payment they name. */
export async function applyFacts(gw: GatewayContext, provider: MethodId, f: Facts, eventId: string | null): Promise<{ outcome: Outcome; paymentId: string | null }> {
  if (f.state === 'ignored') return { outcome: 'ignored', paymentId: f.paymentId };
  const p = await findPayment(gw.db, provider, f.paymentId, f.ref);
  if (!p) return { outcome: 'unknown_payment', paymentId: f.paymentId };
  if (p.provider_ref && f.ref && p.provider_ref !== f.ref) return { outcome: 'ref_mismatch', paymentId: p.payment_id };
  if (f.state === 'pending') return { outcome: 'pending', paymentId: p.payment_id };
  if (f.state === 'paid') {
    if (f.currency && f.currency.toLowerCase() !== p.currency.toLowerCase()) {
      gw.log('error', 'payment currency differs from the checkout; not credited', { payment_id: p.payment_id, expected: p.currency, got: f.currency });
      return { outcome: 'currency_mismatch', paymentId: p.payment_id };
    }
    if (typeof f.amountPaid === 'number' && f.amountPaid !== p.amount) {
      // Underpaid: credited pro rata (creditFor), the shortfall kept on the payment for the admin.
      const c = creditFor(p, f.amountPaid);
      gw.log('warn', 'payment amount differs from the checkout', { payment_id: p.payment_id, expected: p.amount, got: f.amountPaid, credited: c.credited, shortfall: c.shortfall });
    }
    return { outcome: await creditPayment(gw, p, f, eventId), paymentId: p.payment_id };
  }
  const res = await gw.db.kysely
    .updateTable('payments')
    .set({ status: f.state, updated_at: Date.now() })
    .where('payment_id', '=', p.payment_id)
    .where('status', 'in', ['creating', 'pending'])
    .executeTakeFirst();
  return { outcome: Number(res.numUpdatedRows) === 1 ? f.state : 'no_change', paymentId: p.payment_id };
}

/** Remembers each delivery of an event (an audit trail; exactness comes from the ledger). */
export async function recordEvent(db: Db, provider: MethodId, eventId: string, type: string, paymentId: string | null, outcome: string): Promise<void> {
  const at = Date.now();
  await db.kysely
    .insertInto('payment_events')
    .values({ provider, event_id: eventId.slice(0, 200), type: type.slice(0, 100), payment_id: paymentId, outcome, deliveries: 1, first_at: at, last_at: at })
    .onConflict((oc) => oc.columns(['provider', 'event_id']).doUpdateSet((eb) => ({ deliveries: eb('payment_events.deliveries', '+', 1), last_at: at })))
    .execute();
}

export function toPayment(p: PaymentsTable) {
  return {
    payment_id: p.payment_id,
    city_id: p.city_id,
    user_id: p.user_id,
    method: p.provider,
    provider: p.provider === 'a' ? 'stripe' : 'creem',
    status: p.status === 'creating' ? 'pending' : p.status,
    credits: p.credits,
    amount: p.amount,
    currency: p.currency,
    units: p.units,
    amount_paid: p.amount_paid,
    /** Credits actually credited (fewer than `credits` when less than `amount` was paid). */
    credited: p.credited,
    /** Minor units of `amount` not paid (0 when paid in full; null until paid). */
    shortfall: p.shortfall,
    checkout_url: p.status === 'pending' ? p.checkout_url : null,
    created_at: new Date(p.created_at).toISOString(),
    paid_at: p.paid_at ? new Date(p.paid_at).toISOString() : null,
  };
}
