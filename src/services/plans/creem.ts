// Creem subscriptions for plans: a hosted checkout of the plan's recurring product
// (`creem_product_id`), and Creem's subscription events as its docs name them, verified with
// creem-signature (PAYMENT_B_WEBHOOK_SECRET: required here, Creem has no event to read back).
import type { PlansTable, SubscriptionsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { safeEqual } from '../../kernel/crypto.ts';
import { badRequest, GatewayError } from '../../kernel/errors.ts';
import { hmacHex } from '../payment/creem.ts';
import { activate, apply, ended, grantPeriod, pastDue, recordIgnored, revokePeriod, updated, type Change, type Outcome } from './lifecycle.ts';

type Obj = Record<string, any>;

function base(gw: GatewayContext): { key: string; base: string } {
  const key = gw.env.get('PAYMENT_B_API_KEY');
  if (!key) throw new GatewayError(503, 'payment_method_disabled', 'Creem is not configured (PAYMENT_B_API_KEY).');
  return { key, base: (gw.env.get('PAYMENT_B_API_BASE') ?? (key.startsWith('creem_test_') ? 'https://test-api.creem.io' : 'https://api.creem.io')).replace(/\/+$/, '') };
}

export async function creemCheckout(gw: GatewayContext, sub: SubscriptionsTable, plan: PlansTable, successUrl: string): Promise<{ ref: string; url: string }> {
  const c = base(gw);
  const body = { product_id: plan.creem_product_id, request_id: sub.subscription_id, success_url: successUrl, metadata: { subscription_id: sub.subscription_id, city_id: sub.city_id, user_id: sub.user_id, plan_id: sub.plan_id } };
  let res: Response;
  try {
    res = await gw.http.fetch(`${c.base}/v1/checkouts`, { method: 'POST', headers: { 'x-api-key': c.key, 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(20_000) });
  } catch (e) {
    throw new GatewayError(502, 'payment_provider_error', `Creem is unreachable: ${(e as Error).message}`);
  }
  const json = (await res.json().catch(() => ({}))) as Obj;
  if (!res.ok || typeof json.id !== 'string' || typeof json.checkout_url !== 'string') {
    const m = Array.isArray(json.message) ? json.message.join('; ') : json.message ?? `HTTP ${res.status}`;
    throw new GatewayError(502, 'payment_provider_error', `Creem: ${m}`);
  }
  return { ref: json.id, url: json.checkout_url };
}

/** The event of a Creem delivery, its signature checked (constant time) on the raw body. */
export async function verifiedCreemEvent(gw: GatewayContext, raw: Uint8Array, headers: Headers): Promise<{ id: string; type: string; object: Obj }> {
  const secret = gw.env.get('PAYMENT_B_WEBHOOK_SECRET');
  if (!secret) throw badRequest('webhook_secret_required', 'Set PAYMENT_B_WEBHOOK_SECRET: subscription events are applied only when signed.');
  const sig = headers.get('creem-signature') ?? '';
  if (!/^[0-9a-fA-F]{64}$/.test(sig) || !(await safeEqual(sig.toLowerCase(), await hmacHex(secret, raw)))) throw badRequest('invalid_signature', 'The creem-signature header does not match the body.');
  let body: Obj;
  try {
    body = JSON.parse(new TextDecoder().decode(raw)) as Obj;
  } catch {
    throw badRequest('invalid_event', 'The webhook body is not JSON.');
  }
  if (typeof body?.id !== 'string' || typeof body.eventType !== 'string') throw badRequest('invalid_event', 'The webhook body has no event id or type.');
  return { id: body.id, type: body.eventType, object: (body.object ?? {}) as Obj };
}

async function findSub(gw: GatewayContext, ourId: unknown, creemId: unknown): Promise<SubscriptionsTable | undefined> {
  const q = gw.db.kysely.selectFrom('subscriptions').selectAll().where('provider', '=', 'creem');
  if (typeof ourId === 'string' && ourId) {
    const r = await q.where('subscription_id', '=', ourId).executeTakeFirst();
    if (r) return r;
  }
  if (typeof creemId === 'string' && creemId) return q.where('provider_ref', '=', creemId).orderBy('created_at', 'desc').executeTakeFirst();
  return undefined;
}

const productId = (p: unknown) => (typeof p === 'string' ? p : (p as Obj | null)?.id ?? null);
const customerId = (c: unknown) => (typeof c === 'string' ? c : (c as Obj | null)?.id ?? null);

/** Applies one verified Creem event; once per event id. */
export async function applyCreemEvent(gw: GatewayContext, ev: { id: string; type: string; object: Obj }): Promise<{ outcome: Outcome; subscriptionId: string | null }> {
  const seen = await gw.db.kysely.selectFrom('subscription_events').select('subscription_id').where('provider', '=', 'creem').where('event_id', '=', ev.id).executeTakeFirst();
  if (seen) return { outcome: 'replayed', subscriptionId: seen.subscription_id };
  const o = ev.object;
  let sub: SubscriptionsTable | undefined;
  let change: Omit<Change, 'event' | 'subscriptionId'> | null = null;
  const subOf = (s: Obj) => findSub(gw, s.metadata?.subscription_id, s.id);
  switch (ev.type) {
    case 'checkout.completed':
      sub = await findSub(gw, o.metadata?.subscription_id ?? o.request_id, o.subscription?.id);
      if (sub) change = { statements: activate(sub.subscription_id, { provider_ref: o.subscription?.id ?? null, customer_ref: customerId(o.customer) }) };
      break;
    case 'subscription.active':
      sub = await subOf(o);
      if (sub) change = { statements: activate(sub.subscription_id, { provider_ref: o.id, customer_ref: customerId(o.customer) }) };
      break;
    case 'subscription.paid': {
      sub = await subOf(o);
      if (!sub) break;
      const found = sub;
      const byProduct = await gw.db.kysely.selectFrom('plans').selectAll().where('city_id', '=', found.city_id).where('creem_product_id', '=', productId(o.product)).executeTakeFirst();
      const plan = byProduct ?? (await gw.db.kysely.selectFrom('plans').selectAll().where('plan_id', '=', found.plan_id).executeTakeFirst());
      if (!plan) break;
      const start = Date.parse(o.current_period_start_date);
      const end = Date.parse(o.current_period_end_date);
      if (!Number.isFinite(start) || !Number.isFinite(end)) break;
      const first = !(await gw.db.kysely.selectFrom('subscription_periods').select('invoice_ref').where('subscription_id', '=', found.subscription_id).executeTakeFirst());
      const id = found.subscription_id;
      change = {
        statements: (k, at) => [
          ...activate(id, { provider_ref: o.id, customer_ref: customerId(o.customer) })(k, at),
          ...updated(id, { planId: plan.plan_id, cancelAtPeriodEnd: !!Number(found.cancel_at_period_end) })(k, at),
          ...grantPeriod(id, { invoice: String(o.last_transaction_id ?? `${o.id}:${o.current_period_start_date}`), start, end, credits: Number(plan.credits) })(k, at),
        ],
        emit: { type: first ? 'subscription.created' : 'subscription.renewed', data: { plan_id: plan.plan_id, provider: 'creem', period_end: new Date(end).toISOString(), credits: Number(plan.credits) } },
      };
      break;
    }
    case 'subscription.past_due':
      sub = await subOf(o);
      if (sub) change = { statements: pastDue(sub.subscription_id), emit: { type: 'subscription.past_due', data: {} } };
      break;
    case 'subscription.scheduled_cancel':
      sub = await subOf(o);
      if (sub) change = { statements: updated(sub.subscription_id, { cancelAtPeriodEnd: true }), ...(!Number(sub.cancel_at_period_end) ? { emit: { type: 'subscription.canceled' as const, data: { at_period_end: true } } } : {}) };
      break;
    case 'subscription.update': {
      sub = await subOf(o);
      if (!sub) break;
      const plan = await gw.db.kysely.selectFrom('plans').select('plan_id').where('city_id', '=', sub.city_id).where('creem_product_id', '=', productId(o.product)).executeTakeFirst();
      change = { statements: updated(sub.subscription_id, { planId: plan?.plan_id ?? null, cancelAtPeriodEnd: o.status === 'scheduled_cancel' }) };
      break;
    }
    case 'subscription.canceled':
    case 'subscription.expired':
      sub = await subOf(o);
      if (sub) change = { statements: ended(sub.subscription_id), emit: { type: 'subscription.ended', data: { plan_id: sub.plan_id, reason: ev.type } } };
      break;
    case 'refund.created':
    case 'dispute.created': {
      // A refunded (or disputed) subscription transaction: the period it paid for allows nothing more.
      const tx = typeof o.transaction === 'string' ? o.transaction : o.transaction?.id;
      if (!o.subscription || typeof tx !== 'string') break;
      sub = await subOf(o.subscription as Obj);
      if (sub) change = { statements: revokePeriod(sub.subscription_id, tx) };
      break;
    }
  }
  if (!sub || !change) {
    await recordIgnored(gw, 'creem', ev.id, ev.type, sub ? 'ignored' : 'unknown_subscription', sub?.subscription_id ?? null);
    return { outcome: sub ? 'ignored' : 'unknown_subscription', subscriptionId: sub?.subscription_id ?? null };
  }
  const outcome = await apply(gw, sub, { event: { provider: 'creem', id: ev.id, type: ev.type }, subscriptionId: sub.subscription_id, ...change });
  return { outcome, subscriptionId: sub.subscription_id };
}
