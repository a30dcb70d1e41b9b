// plans (issue 34): subscription plans as data per city, subscriptions driven by the payment
// providers' signed events, and the charge order of a subscriber's calls (billing.ts).
import { z } from 'zod';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import { conflict, forbidden, GatewayError, notFound } from '../../kernel/errors.ts';
import type { Identity } from '../../kernel/identity.ts';
import { ALLOWANCE, BILLING, type Billing } from '../../kernel/metering.ts';
import { action, defineService } from '../../kernel/service.ts';
import { WINDOWS, type RollingWindows } from '../../kernel/windows.ts';
import { scopeCity } from '../balance/index.ts';
import { cityIdSchema, requireCity } from '../cities/index.ts';
import { userIdSchema } from '../cities/tokens.ts';
import { billings, planBilling, PlanBilling } from './billing.ts';
import { apply, grantPeriod, updated } from './lifecycle.ts';
import { planFields, planIdSchema, toPlan } from './schema.ts';
import { graceMs, readLive } from './subscriptions.ts';
import { subscriptionActions } from './subscribe.ts';


export async function requirePlan(gw: GatewayContext, planId: string, identity: Identity) {
  const row = await gw.db.kysely.selectFrom('plans').selectAll().where('plan_id', '=', planId).executeTakeFirst();
  const bound = identity.kind === 'user' || identity.kind === 'bureau' ? identity.cityId : null;
  if (!row || (bound && row.city_id !== bound)) throw notFound('plan_not_found', `No plan '${planId}'.`, 'plan_id');
  return row;
}

/** One interval after `start` (calendar months, clamped to the month's last day as Stripe does). */
export function addInterval(start: number, interval: 'month' | 'year'): number {
  const d = new Date(start);
  const months = interval === 'year' ? 12 : 1;
  const target = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + months, 1, d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()));
  const last = new Date(Date.UTC(target.getUTCFullYear(), target.getUTCMonth() + 1, 0)).getUTCDate();
  target.setUTCDate(Math.min(d.getUTCDate(), last));
  return target.getTime();
}

const windowsJson = (w: { window: number; limit: number }[] | undefined) => JSON.stringify((w ?? []).map((x) => ({ window: x.window, limit: x.limit })));

function checkWindows(credits: number | undefined, windows: { limit: number }[] | undefined) {
  if (credits === undefined || !windows) return;
  const i = windows.findIndex((w) => w.limit > credits);
  if (i >= 0) throw new GatewayError(400, 'invalid_input', `windows[${i}].limit is more than the credits of a period (${credits}).`, { param: `windows.${i}.limit` });
}

export const plansService = defineService({
  id: 'plans',
  name: 'Plans',
  description: 'Subscription plans per city: credits per period, capped per rolling window, paid through Stripe or Creem.',
  env: [{ key: 'PLANS_PAST_DUE_GRACE_HOURS', description: 'How long a subscription whose payment failed keeps serving (default 72).', required: false }],
  init(gw) {
    const windows = gw.use<RollingWindows>(WINDOWS);
    if (!gw.use<Billing>(BILLING) || !windows) return; // no balance service: nothing is charged, plans only stored
    const b = new PlanBilling(gw, windows);
    billings.set(gw, b);
    gw.provide(ALLOWANCE, b); // ai asks it before the billing (the charge order)
    gw.limits.userLimits = (cityId, userId) => b.subs.limitsOf(cityId, userId); // plan limits replace the city's for subscribers
  },
  actions: {
    create: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Create a plan of a city',
      input: z.object({ city_id: cityIdSchema, ...planFields }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id)!;
        await requireCity(gateway, cityId, identity);
        checkWindows(input.credits, input.windows);
        const at = Date.now();
        const row = {
          plan_id: newId('plan', 16),
          city_id: cityId,
          name: input.name,
          description: input.description ?? '',
          billing_interval: input.interval,
          amount: input.price.amount,
          currency: input.price.currency,
          credits: input.credits,
          windows: windowsJson(input.windows),
          models: input.models ? JSON.stringify(input.models) : null,
          limits: input.limits ? JSON.stringify(input.limits) : null,
          overflow: input.overflow === false ? 0 : 1,
          stripe_price_id: input.stripe_price_id ?? null,
          creem_product_id: input.creem_product_id ?? null,
          sort_order: input.order ?? 0,
          status: 'active' as const,
          created_at: at,
          updated_at: at,
        };
        await gateway.db.kysely.insertInto('plans').values(row).execute();
        return { plan: toPlan(row) };
      },
    }),
    update: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Change a plan (subscribers get the change from their next call; the price applies from their next period at the provider)',
      input: z.object({ plan_id: planIdSchema, ...z.object(planFields).partial().shape }),
      handler: async ({ gateway, identity, input }) => {
        const row = await requirePlan(gateway, input.plan_id, identity);
        checkWindows(input.credits ?? Number(row.credits), input.windows ?? (JSON.parse(row.windows) as { limit: number }[]));
        const set: Partial<typeof row> = { updated_at: Date.now() };
        if (input.name !== undefined) set.name = input.name;
        if (input.description !== undefined) set.description = input.description;
        if (input.interval !== undefined) set.billing_interval = input.interval;
        if (input.price !== undefined) {
          set.amount = input.price.amount;
          set.currency = input.price.currency;
        }
        if (input.credits !== undefined) set.credits = input.credits;
        if (input.windows !== undefined) set.windows = windowsJson(input.windows);
        if (input.models !== undefined) set.models = input.models ? JSON.stringify(input.models) : null;
        if (input.limits !== undefined) set.limits = input.limits ? JSON.stringify(input.limits) : null;
        if (input.overflow !== undefined) set.overflow = input.overflow ? 1 : 0;
        if (input.stripe_price_id !== undefined) set.stripe_price_id = input.stripe_price_id;
        if (input.creem_product_id !== undefined) set.creem_product_id = input.creem_product_id;
        if (input.order !== undefined) set.sort_order = input.order;
        // A new price or interval needs a new Stripe price (prices are immutable there).
        if ((input.price !== undefined || input.interval !== undefined) && input.stripe_price_id === undefined) set.stripe_price_id = null;
        await gateway.db.kysely.updateTable('plans').set(set).where('plan_id', '=', row.plan_id).execute();
        planBilling(gateway)?.subs.forget(row.city_id);
        return { plan: toPlan({ ...row, ...set }) };
      },
    }),
    archive: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Archive a plan: no new subscriptions; current subscribers keep it until they leave',
      input: z.object({ plan_id: planIdSchema }),
      handler: async ({ gateway, identity, input }) => {
        const row = await requirePlan(gateway, input.plan_id, identity);
        const at = Date.now();
        await gateway.db.kysely.updateTable('plans').set({ status: 'archived', updated_at: at }).where('plan_id', '=', row.plan_id).execute();
        return { plan: toPlan({ ...row, status: 'archived', updated_at: at }) };
      },
    }),
    list: action({
      method: 'GET',
      auth: ['user', 'admin', 'bureau'],
      summary: "A city's plans in their order (users see the active ones of their own city)",
      input: z.object({ city_id: cityIdSchema.optional(), include_archived: z.enum(['true', 'false']).optional() }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id);
        let q = gateway.db.kysely.selectFrom('plans').selectAll();
        if (cityId) q = q.where('city_id', '=', cityId);
        if (identity.kind === 'user' || input.include_archived !== 'true') q = q.where('status', '=', 'active');
        const rows = await q.orderBy('city_id').orderBy('sort_order').orderBy('created_at').limit(1000).execute();
        return { items: rows.map(toPlan) };
      },
    }),
    assign: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Give a user a plan without a payment (a comp or a trial): one period from now, granted at once',
      errors: [409],
      input: z.object({ city_id: cityIdSchema, user_id: userIdSchema, plan_id: planIdSchema }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id)!;
        const plan = await requirePlan(gateway, input.plan_id, identity);
        if (plan.city_id !== cityId) throw notFound('plan_not_found', `No plan '${input.plan_id}' in city '${cityId}'.`, 'plan_id');
        const live = await gateway.db.kysely.selectFrom('subscriptions').selectAll().where('city_id', '=', cityId).where('user_id', '=', input.user_id).where('live', '=', 1).executeTakeFirst();
        if (live && live.provider !== 'manual') throw conflict('already_subscribed', 'The user has a paid subscription; change it through the provider.', 'user_id');
        const start = gateway.use<RollingWindows>(WINDOWS)?.now() ?? Date.now();
        const end = addInterval(start, plan.billing_interval);
        let sub = live;
        if (!sub) {
          const at = Date.now();
          sub = { subscription_id: newId('sub', 16), city_id: cityId, user_id: input.user_id, plan_id: plan.plan_id, provider: 'manual', provider_ref: null, customer_ref: null, checkout_ref: null, status: 'active', cancel_at_period_end: 0, period_start: null, period_end: null, past_due_since: null, live: 1, created_at: at, updated_at: at };
          await gateway.db.kysely.insertInto('subscriptions').values(sub).execute();
        }
        const subId = sub.subscription_id;
        await apply(gateway, sub, {
          event: null,
          subscriptionId: subId,
          statements: (k, at) => [...updated(subId, { planId: plan.plan_id, cancelAtPeriodEnd: false })(k, at), ...grantPeriod(subId, { invoice: `manual:${start}`, start, end, credits: Number(plan.credits) })(k, at)],
          emit: { type: live ? 'subscription.renewed' : 'subscription.created', data: { plan_id: plan.plan_id, provider: 'manual', period_end: new Date(end).toISOString() } },
        });
        planBilling(gateway)?.subs.forget(cityId, input.user_id);
        return { subscription: await subscriptionView(gateway, cityId, input.user_id) };
      },
    }),
    me: action({
      method: 'GET',
      auth: ['user'],
      summary: "The caller's plan: status, period, and each window's used, limit and reset",
      input: z.object({ city_id: z.string().optional() }),
      handler: async ({ gateway, identity }) => {
        const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
        return { subscription: await subscriptionView(gateway, cityId, userId) };
      },
    }),
    subscription: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: "A user's plan: status, period, and each window's used, limit and reset",
      input: z.object({ city_id: cityIdSchema, user_id: userIdSchema }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id)!;
        if (identity.kind === 'bureau' && identity.cityId !== cityId) throw forbidden('city_mismatch', 'This credential is bound to another city.');
        return { subscription: await subscriptionView(gateway, cityId, input.user_id) };
      },
    }),
    ...subscriptionActions,
  },
});

/** What plans/me shows. */
export async function subscriptionView(gw: GatewayContext, cityId: string, userId: string) {
  const windows = gw.use<RollingWindows>(WINDOWS);
  const now = windows?.now() ?? Date.now();
  const sub = await readLive(gw, cityId, userId, now);
  if (!sub) return null;
  const states = windows && sub.period ? await windows.state(sub.scope, sub.windows) : [];
  const r = sub.row;
  const refused = r.status === 'past_due' && r.past_due_since !== null && now - Number(r.past_due_since) > graceMs(gw);
  return {
    id: r.subscription_id,
    plan: sub.plan,
    provider: r.provider,
    status: r.status,
    serving: (r.status === 'active' || r.status === 'past_due') && !refused && !!sub.period,
    cancel_at_period_end: !!Number(r.cancel_at_period_end),
    period_start: r.period_start === null ? null : new Date(Number(r.period_start)).toISOString(),
    period_end: r.period_end === null ? null : new Date(Number(r.period_end)).toISOString(),
    past_due_since: r.past_due_since === null ? null : new Date(Number(r.past_due_since)).toISOString(),
    windows: states.map((w) => ({ name: w.name, seconds: w.seconds, limit: w.limit, used: w.used, remaining: w.remaining, resets_at: w.resets_at === null ? null : new Date(w.resets_at).toISOString() })),
  };
}
