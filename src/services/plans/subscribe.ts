// plans/subscribe, plans/portal, the result pages and the providers' subscription webhooks.
import { z } from 'zod';
import type { SubscriptionsTable } from '../../db/schema.ts';
import { newId } from '../../kernel/crypto.ts';
import { badRequest, conflict, GatewayError, notFound } from '../../kernel/errors.ts';
import type { Identity } from '../../kernel/identity.ts';
import { action } from '../../kernel/service.ts';
import { page } from '../payment/pages.ts';
import { planBilling } from './billing.ts';
import { planIdSchema } from './schema.ts';
import { applyStripeEvent, ensurePrice, stripeCheckout, stripePortal, stripeUpdate, verifiedStripeEvent } from './stripe.ts';
import { apply, updated } from './lifecycle.ts';
import { applyCreemEvent, creemCheckout, verifiedCreemEvent } from './creem.ts';
import type { GatewayContext } from '../../kernel/context.ts';

const WEBHOOK_MAX_BYTES = 512 * 1024;

/** This process reads the subscription again on its next call (others within SUB_CACHE_MS). */
async function forgetSub(gw: GatewayContext, subscriptionId: string | null): Promise<void> {
  if (!subscriptionId) return;
  const row = await gw.db.kysely.selectFrom('subscriptions').select(['city_id', 'user_id']).where('subscription_id', '=', subscriptionId).executeTakeFirst();
  if (row) planBilling(gw)?.subs.forget(row.city_id, row.user_id);
}

async function liveOf(gw: GatewayContext, cityId: string, userId: string): Promise<SubscriptionsTable> {
  const sub = await gw.db.kysely.selectFrom('subscriptions').selectAll().where('city_id', '=', cityId).where('user_id', '=', userId).where('live', '=', 1).executeTakeFirst();
  if (!sub) throw conflict('no_subscription', 'You have no plan.');
  return sub;
}

/** Stripe: asks Stripe (its event then changes the state); a comp: changed here at once. */
async function cancelOrResume(gw: GatewayContext, sub: SubscriptionsTable, cancel: boolean) {
  if (sub.provider === 'stripe' && sub.provider_ref) {
    await stripeUpdate(gw, sub.provider_ref, { cancelAtPeriodEnd: cancel });
    return { subscription_id: sub.subscription_id, cancel_at_period_end: cancel, status: 'pending' };
  }
  if (sub.provider !== 'manual') throw conflict('manage_at_provider', 'This subscription is managed at its provider (Creem: its customer portal).');
  await apply(gw, sub, { event: null, subscriptionId: sub.subscription_id, statements: updated(sub.subscription_id, { cancelAtPeriodEnd: cancel }), ...(cancel ? { emit: { type: 'subscription.canceled' as const, data: { at_period_end: true } } } : {}) });
  return { subscription_id: sub.subscription_id, cancel_at_period_end: cancel, status: 'applied' };
}

export const subscriptionActions = {
  subscribe: action({
    method: 'POST',
    auth: ['user'],
    ipLimited: true,
    errors: [409, 502, 503],
    summary: 'Subscribe to a plan: a Stripe Checkout in subscription mode; the first paid invoice starts the plan',
    input: z.object({ plan_id: planIdSchema, method: z.enum(['a', 'stripe', 'b', 'creem']).optional().describe('the provider: Stripe (a, default) or Creem (b; the plan needs creem_product_id)') }),
    handler: async ({ gateway, identity, input, request }) => {
      const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
      const plan = await gateway.db.kysely.selectFrom('plans').selectAll().where('plan_id', '=', input.plan_id).executeTakeFirst();
      if (!plan || plan.city_id !== cityId || plan.status !== 'active') throw notFound('plan_not_found', `No plan '${input.plan_id}' to subscribe to.`, 'plan_id');
      const live = await gateway.db.kysely.selectFrom('subscriptions').select(['subscription_id', 'provider']).where('city_id', '=', cityId).where('user_id', '=', userId).where('live', '=', 1).executeTakeFirst();
      if (live) throw conflict('already_subscribed', 'You already have a plan: change or cancel it through plans/portal.', 'plan_id');
      const creem = input.method === 'b' || input.method === 'creem';
      if (creem && !plan.creem_product_id) throw badRequest('plan_not_on_creem', 'This plan has no Creem product (creem_product_id).', 'method');
      if (!gateway.env.has(creem ? 'PAYMENT_B_API_KEY' : 'PAYMENT_A_SECRET_KEY')) throw new GatewayError(503, 'payment_method_disabled', `${creem ? 'Creem' : 'Stripe'} is not configured.`);
      const origin = gateway.publicOrigin(request);
      const price = creem ? null : await ensurePrice(gateway, plan);
      const at = Date.now();
      const sub: SubscriptionsTable = {
        subscription_id: newId('sub', 16),
        city_id: cityId,
        user_id: userId,
        plan_id: plan.plan_id,
        provider: creem ? 'creem' : 'stripe',
        provider_ref: null,
        customer_ref: null,
        checkout_ref: null,
        status: 'incomplete',
        cancel_at_period_end: 0,
        period_start: null,
        period_end: null,
        past_due_since: null,
        live: null, // live once paid: an abandoned checkout blocks nothing
        created_at: at,
        updated_at: at,
      };
      await gateway.db.kysely.insertInto('subscriptions').values(sub).execute();
      const q = `subscription_id=${encodeURIComponent(sub.subscription_id)}`;
      const s = price
        ? await stripeCheckout(gateway, sub, price, { success: `${origin}/v1/plans/redirect/success?${q}`, cancel: `${origin}/v1/plans/redirect/cancel?${q}` })
        : await creemCheckout(gateway, sub, plan, `${origin}/v1/plans/redirect/success?${q}`);
      await gateway.db.kysely.updateTable('subscriptions').set({ checkout_ref: s.ref }).where('subscription_id', '=', sub.subscription_id).execute();
      return { subscription_id: sub.subscription_id, checkout_url: s.url, plan_id: plan.plan_id };
    },
  }),
  portal: action({
    method: 'POST',
    auth: ['user'],
    errors: [409, 502],
    summary: "A link to Stripe's customer portal (change or cancel the plan, update the card, invoices)",
    input: z.object({ return_url: z.url().optional() }),
    handler: async ({ gateway, identity, request }) => {
      const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
      const sub = await gateway.db.kysely
        .selectFrom('subscriptions')
        .selectAll()
        .where('city_id', '=', cityId)
        .where('user_id', '=', userId)
        .where('provider', '=', 'stripe')
        .where('customer_ref', 'is not', null)
        .orderBy('created_at', 'desc')
        .executeTakeFirst();
      if (!sub?.customer_ref) throw conflict('no_subscription', 'You have no Stripe subscription to manage.');
      // Back to the gateway's public origin only (never a URL the caller names: no open redirect).
      return { url: await stripePortal(gateway, sub.customer_ref, `${gateway.publicOrigin(request)}/v1/plans/redirect/success`) };
    },
  }),
  change: action({
    method: 'POST',
    auth: ['user'],
    errors: [409, 502],
    summary: "Move to another plan of the city: Stripe prorates and invoices the difference now; the new plan's allowance starts with that invoice",
    input: z.object({ plan_id: planIdSchema }),
    handler: async ({ gateway, identity, input }) => {
      const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
      const sub = await liveOf(gateway, cityId, userId);
      const plan = await gateway.db.kysely.selectFrom('plans').selectAll().where('plan_id', '=', input.plan_id).executeTakeFirst();
      if (!plan || plan.city_id !== cityId || plan.status !== 'active') throw notFound('plan_not_found', `No plan '${input.plan_id}' to move to.`, 'plan_id');
      if (plan.plan_id === sub.plan_id) throw conflict('same_plan', 'That is your plan already.', 'plan_id');
      if (sub.provider !== 'stripe' || !sub.provider_ref) throw conflict('not_changeable', 'This subscription is not paid through Stripe: the city changes it (plans/assign).');
      await stripeUpdate(gateway, sub.provider_ref, { price: await ensurePrice(gateway, plan) });
      return { subscription_id: sub.subscription_id, plan_id: plan.plan_id, status: 'pending', note: 'applies when Stripe confirms the change (customer.subscription.updated, invoice.paid)' };
    },
  }),
  cancel: action({
    method: 'POST',
    auth: ['user'],
    errors: [409, 502],
    summary: 'Cancel at the end of the paid period (the plan serves until then); plans/resume undoes it',
    input: z.object({}),
    handler: async ({ gateway, identity }) => {
      const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
      return cancelOrResume(gateway, await liveOf(gateway, cityId, userId), true);
    },
  }),
  resume: action({
    method: 'POST',
    auth: ['user'],
    errors: [409, 502],
    summary: 'Undo a cancellation at the period end',
    input: z.object({}),
    handler: async ({ gateway, identity }) => {
      const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
      return cancelOrResume(gateway, await liveOf(gateway, cityId, userId), false);
    },
  }),
  'redirect/success': action({
    method: 'GET',
    auth: [],
    produces: ['text/html'],
    summary: 'Where the browser lands after a subscription checkout or the portal',
    input: z.object({ subscription_id: z.string().max(64).optional() }),
    handler: () => page('Thank you', 'Your plan starts as soon as the payment is confirmed (usually within seconds).'),
  }),
  'redirect/cancel': action({
    method: 'GET',
    auth: [],
    produces: ['text/html'],
    summary: 'Where the browser lands when a subscription checkout is abandoned',
    input: z.object({ subscription_id: z.string().max(64).optional() }),
    handler: () => page('Checkout canceled', 'Nothing was charged.'),
  }),
  'webhook/creem': action({
    method: 'POST',
    auth: [],
    body: 'raw',
    maxBodyBytes: WEBHOOK_MAX_BYTES,
    summary: 'Creem subscription events (register {base_url}/v1/plans/webhook/creem)',
    handler: async ({ gateway, request, rawBody }) => {
      const event = await verifiedCreemEvent(gateway, await rawBody(), request.headers);
      const r = await applyCreemEvent(gateway, event);
      await forgetSub(gateway, r.subscriptionId);
      gateway.log('info', 'plans: creem event', { event_id: event.id, type: event.type, subscription_id: r.subscriptionId, outcome: r.outcome });
      return { received: true, outcome: r.outcome };
    },
  }),
  'webhook/stripe': action({
    method: 'POST',
    auth: [],
    body: 'raw',
    maxBodyBytes: WEBHOOK_MAX_BYTES,
    summary: 'Stripe subscription events (register {base_url}/v1/plans/webhook/stripe)',
    handler: async ({ gateway, request, rawBody }) => {
      const raw = await rawBody();
      if (!gateway.env.has('PAYMENT_A_SECRET_KEY')) throw badRequest('payment_method_disabled', 'Stripe is not configured.');
      const event = await verifiedStripeEvent(gateway, raw, request.headers);
      const r = await applyStripeEvent(gateway, event);
      await forgetSub(gateway, r.subscriptionId);
      gateway.log('info', 'plans: stripe event', { event_id: event.id, type: event.type, subscription_id: r.subscriptionId, outcome: r.outcome });
      return { received: true, outcome: r.outcome };
    },
  }),
};
