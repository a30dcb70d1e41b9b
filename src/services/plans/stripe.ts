// Stripe Billing for plans: a recurring price per plan (created through the API on the first
// subscribe unless the plan names one), Checkout in subscription mode, the customer portal,
// and the subscription events, verified as payments verify theirs (payment/stripe.ts).
import type Stripe from 'stripe';
import type { PlansTable, SubscriptionsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { client, upstream, verifiedStripeEvent } from '../payment/stripe.ts';
import { activate, apply, ended, grantPeriod, pastDue, recordIgnored, revokePeriod, updated, type Change, type Outcome } from './lifecycle.ts';

type Obj = Record<string, any>;

/** The plan's recurring Stripe price: its own, or one created now (and kept on the plan). */
export async function ensurePrice(gw: GatewayContext, plan: PlansTable): Promise<string> {
  if (plan.stripe_price_id) return plan.stripe_price_id;
  try {
    const price = await (await client(gw)).prices.create(
      {
        unit_amount: Number(plan.amount),
        currency: plan.currency,
        recurring: { interval: plan.billing_interval },
        product_data: { name: plan.name, metadata: { plan_id: plan.plan_id, city_id: plan.city_id } },
        metadata: { plan_id: plan.plan_id },
      },
      { idempotencyKey: `plan-price:${plan.plan_id}:${plan.updated_at}` },
    );
    await gw.db.kysely.updateTable('plans').set({ stripe_price_id: price.id }).where('plan_id', '=', plan.plan_id).where('stripe_price_id', 'is', null).execute();
    return price.id;
  } catch (e) {
    throw upstream(e);
  }
}

export async function stripeCheckout(gw: GatewayContext, sub: SubscriptionsTable, price: string, urls: { success: string; cancel: string }): Promise<{ ref: string; url: string }> {
  const metadata = { subscription_id: sub.subscription_id, city_id: sub.city_id, user_id: sub.user_id, plan_id: sub.plan_id };
  try {
    const s = await (await client(gw)).checkout.sessions.create(
      {
        mode: 'subscription',
        client_reference_id: sub.subscription_id,
        line_items: [{ price, quantity: 1 }],
        metadata,
        subscription_data: { metadata },
        success_url: urls.success,
        cancel_url: urls.cancel,
      },
      { idempotencyKey: `subscribe:${sub.subscription_id}` },
    );
    if (!s.url) throw new Error('Stripe returned a session without a URL');
    return { ref: s.id, url: s.url };
  } catch (e) {
    throw upstream(e);
  }
}

export async function stripePortal(gw: GatewayContext, customer: string, returnUrl: string): Promise<string> {
  try {
    return (await (await client(gw)).billingPortal.sessions.create({ customer, return_url: returnUrl })).url;
  } catch (e) {
    throw upstream(e);
  }
}

/** Moves a Stripe subscription to another price (Stripe prorates and invoices the difference now), or sets cancel at period end. */
export async function stripeUpdate(gw: GatewayContext, subRef: string, u: { price?: string; cancelAtPeriodEnd?: boolean }): Promise<void> {
  try {
    const c = await client(gw);
    if (u.price) {
      const current = await c.subscriptions.retrieve(subRef);
      const item = current.items.data[0];
      await c.subscriptions.update(subRef, { items: [{ id: item.id, price: u.price }], proration_behavior: 'always_invoice' });
    }
    if (u.cancelAtPeriodEnd !== undefined) await c.subscriptions.update(subRef, { cancel_at_period_end: u.cancelAtPeriodEnd });
  } catch (e) {
    throw upstream(e);
  }
}

/** The invoice a charge paid (null: not an invoice's, or Stripe does not say). */
async function chargeInvoice(gw: GatewayContext, chargeId: string): Promise<string | null> {
  try {
    const c = (await (await client(gw)).charges.retrieve(chargeId)) as unknown as Obj;
    return typeof c.invoice === 'string' ? c.invoice : (c.invoice?.id ?? null);
  } catch (e) {
    throw upstream(e);
  }
}

const ms = (s: unknown) => Number(s) * 1000;

/** Our subscription an object of a Stripe event belongs to (by our id in its metadata, else by Stripe's id). */
async function findSub(gw: GatewayContext, ourId: unknown, stripeId: unknown): Promise<SubscriptionsTable | undefined> {
  const q = gw.db.kysely.selectFrom('subscriptions').selectAll();
  if (typeof ourId === 'string' && ourId) {
    const r = await q.where('subscription_id', '=', ourId).where('provider', '=', 'stripe').executeTakeFirst();
    if (r) return r;
  }
  if (typeof stripeId === 'string' && stripeId) return q.where('provider', '=', 'stripe').where('provider_ref', '=', stripeId).orderBy('created_at', 'desc').executeTakeFirst();
  return undefined;
}

/** The plan of the city whose Stripe price this is (a plan change), else the subscription's. */
async function planOfPrice(gw: GatewayContext, sub: SubscriptionsTable, price: unknown): Promise<PlansTable | undefined> {
  if (typeof price === 'string') {
    const p = await gw.db.kysely.selectFrom('plans').selectAll().where('city_id', '=', sub.city_id).where('stripe_price_id', '=', price).executeTakeFirst();
    if (p) return p;
  }
  return gw.db.kysely.selectFrom('plans').selectAll().where('plan_id', '=', sub.plan_id).executeTakeFirst();
}

const invoiceSubscription = (inv: Obj) => inv.parent?.subscription_details?.subscription ?? inv.subscription ?? null;
const invoiceOurId = (inv: Obj) => inv.parent?.subscription_details?.metadata?.subscription_id ?? inv.subscription_details?.metadata?.subscription_id ?? null;
const linePrice = (line: Obj | undefined) => line?.pricing?.price_details?.price ?? line?.price?.id ?? null;

/** Applies one verified Stripe event to the subscription it concerns; once per event id. */
export async function applyStripeEvent(gw: GatewayContext, event: Stripe.Event): Promise<{ outcome: Outcome; subscriptionId: string | null }> {
  const o = event.data.object as unknown as Obj;
  const ev = { provider: 'stripe', id: event.id, type: event.type };
  const seen = await gw.db.kysely.selectFrom('subscription_events').select('subscription_id').where('provider', '=', 'stripe').where('event_id', '=', event.id).executeTakeFirst();
  if (seen) return { outcome: 'replayed', subscriptionId: seen.subscription_id };
  let sub: SubscriptionsTable | undefined;
  let change: Omit<Change, 'event' | 'subscriptionId'> | null = null;
  switch (event.type) {
    case 'checkout.session.completed':
      if (o.mode !== 'subscription') break;
      sub = await findSub(gw, o.metadata?.subscription_id ?? o.client_reference_id, o.subscription);
      if (sub) {
        const id = sub.subscription_id;
        change = { statements: activate(id, { provider_ref: o.subscription ?? null, customer_ref: o.customer ?? null }) };
      }
      break;
    case 'invoice.paid':
    case 'invoice.payment_succeeded': {
      sub = await findSub(gw, invoiceOurId(o), invoiceSubscription(o));
      if (!sub) break;
      const line = (o.lines?.data ?? [])[0] as Obj | undefined;
      const plan = await planOfPrice(gw, sub, linePrice(line));
      if (!plan) break;
      const start = ms(line?.period?.start ?? o.period_start);
      const end = ms(line?.period?.end ?? o.period_end);
      const id = sub.subscription_id;
      const first = o.billing_reason === 'subscription_create';
      change = {
        statements: (k, at) => [
          ...activate(id, { provider_ref: invoiceSubscription(o), customer_ref: o.customer ?? null })(k, at),
          ...updated(id, { planId: plan.plan_id, cancelAtPeriodEnd: !!Number(sub!.cancel_at_period_end) })(k, at),
          ...grantPeriod(id, { invoice: String(o.id), start, end, credits: Number(plan.credits) })(k, at),
        ],
        emit: { type: first ? 'subscription.created' : 'subscription.renewed', data: { plan_id: plan.plan_id, provider: 'stripe', invoice: o.id, period_end: new Date(end).toISOString(), credits: Number(plan.credits) } },
      };
      break;
    }
    case 'invoice.payment_failed':
      sub = await findSub(gw, invoiceOurId(o), invoiceSubscription(o));
      if (sub) change = { statements: pastDue(sub.subscription_id), emit: { type: 'subscription.past_due', data: { invoice: o.id, attempt_count: o.attempt_count ?? null } } };
      break;
    case 'customer.subscription.updated': {
      sub = await findSub(gw, o.metadata?.subscription_id, o.id);
      if (!sub) break;
      const item = (o.items?.data ?? [])[0] as Obj | undefined;
      const plan = await planOfPrice(gw, sub, item?.price?.id);
      const id = sub.subscription_id;
      const canceling = !!o.cancel_at_period_end;
      const periodEnd = item?.current_period_end ?? o.current_period_end;
      change = {
        statements: (k, at) => [
          ...(o.status === 'past_due' ? pastDue(id)(k, at) : []),
          ...updated(id, { planId: plan?.plan_id ?? null, cancelAtPeriodEnd: canceling, periodEnd: periodEnd ? ms(periodEnd) : null })(k, at),
        ],
        ...(canceling && !Number(sub.cancel_at_period_end) ? { emit: { type: 'subscription.canceled' as const, data: { at_period_end: true, period_end: periodEnd ? new Date(ms(periodEnd)).toISOString() : null } } } : {}),
      };
      break;
    }
    case 'customer.subscription.created':
      // Nothing to apply: the checkout's completion and the first invoice start the plan.
      sub = await findSub(gw, o.metadata?.subscription_id, o.id);
      break;
    case 'customer.subscription.deleted':
      sub = await findSub(gw, o.metadata?.subscription_id, o.id);
      if (sub) change = { statements: ended(sub.subscription_id), emit: { type: 'subscription.ended', data: { plan_id: sub.plan_id } } };
      break;
    case 'charge.refunded':
    case 'charge.dispute.created': {
      // A subscription invoice's charge: the period it paid for allows nothing more. A dispute
      // names only the charge: its invoice is read from Stripe.
      let invoice = o.invoice ?? null;
      if (typeof invoice !== 'string' && o.object === 'dispute' && typeof o.charge === 'string') invoice = await chargeInvoice(gw, o.charge);
      if (typeof invoice !== 'string') break;
      const period = await gw.db.kysely.selectFrom('subscription_periods').select('subscription_id').where('invoice_ref', '=', invoice).executeTakeFirst();
      if (!period) break;
      sub = await gw.db.kysely.selectFrom('subscriptions').selectAll().where('subscription_id', '=', period.subscription_id).executeTakeFirst();
      if (sub) change = { statements: revokePeriod(sub.subscription_id, invoice) };
      break;
    }
  }
  if (!sub || !change) {
    await recordIgnored(gw, 'stripe', event.id, event.type, sub ? 'ignored' : 'unknown_subscription', sub?.subscription_id ?? null);
    return { outcome: sub ? 'ignored' : 'unknown_subscription', subscriptionId: sub?.subscription_id ?? null };
  }
  const outcome = await apply(gw, sub, { event: ev, subscriptionId: sub.subscription_id, ...change });
  return { outcome, subscriptionId: sub.subscription_id };
}

export { verifiedStripeEvent };
