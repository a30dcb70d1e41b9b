// payment: top-ups through provider A (Stripe) and B (Creem). A checkout creates a pending
// payment; a verified webhook (or reading the checkout back from the provider) credits it
// exactly once.
import { sql } from 'kysely';
import { z } from 'zod';
import type { PaymentsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import { badRequest, notFound } from '../../kernel/errors.ts';
import type { Identity } from '../../kernel/identity.ts';
import { action, defineService, pageQuery } from '../../kernel/service.ts';
import { scopeCity } from '../balance/index.ts';
import { cityIdSchema } from '../cities/index.ts';
import { creemProvider } from './creem.ts';
import { page } from './pages.ts';
import { creditsPerUsd, type PaymentProvider } from './provider.ts';
import { applyFacts, findPayment, recordEvent, toPayment } from './store.ts';
import { stripeProvider } from './stripe.ts';
import { applyRefund, refundsAction } from './refunds.ts';
import { publicOriginOrNull } from '../../kernel/public-url.ts';

const providers: Record<'a' | 'b', PaymentProvider> = { a: stripeProvider, b: creemProvider };
const byName: Record<string, PaymentProvider> = { a: stripeProvider, b: creemProvider, stripe: stripeProvider, creem: creemProvider };

const paymentIdSchema = z.string().regex(/^pay_[A-Za-z0-9_-]{8,40}$/, 'not a payment id');
const WEBHOOK_MAX_BYTES = 512 * 1024;

/** checkout's return_to: a URL on the gateway's own public origin, kept as its path and query. */
function returnPath(returnTo: string, origin: string): string {
  let url: URL | null = null;
  try {
    url = new URL(returnTo);
  } catch {
    url = null;
  }
  if (!url || url.origin !== origin || url.username || url.password) {
    throw badRequest('return_to_not_allowed', `return_to must be a URL on this gateway's public origin (${origin}).`, 'return_to');
  }
  return url.pathname + url.search;
}

/** The result pages' return_to, only as a path on the public origin (never an open redirect). */
function returnUrl(path: string | undefined, origin: string | null): URL | null {
  if (!path || !origin || !path.startsWith('/') || path.startsWith('//') || path.includes('\\')) return null;
  try {
    const url = new URL(path, origin);
    return url.origin === origin ? url : null;
  } catch {
    return null;
  }
}

function cursorOf(c: string | undefined): [number, string] | null {
  if (c === undefined) return null;
  const m = /^(\d{1,15})_(pay_[A-Za-z0-9_-]+)$/.exec(c);
  if (!m) throw badRequest('invalid_cursor', 'cursor is not one this API returned.', 'cursor');
  return [Number(m[1]), m[2]];
}

async function listPayments(gw: GatewayContext, f: { cityId?: string; userId?: string; status?: string; cursor?: string; limit: number }) {
  let q = gw.db.kysely.selectFrom('payments').selectAll();
  if (f.cityId) q = q.where('city_id', '=', f.cityId);
  if (f.userId) q = q.where('user_id', '=', f.userId);
  if (f.status) q = f.status === 'pending' ? q.where('status', 'in', ['pending', 'creating']) : q.where('status', '=', f.status as 'paid');
  const c = cursorOf(f.cursor);
  if (c) q = q.where((eb) => eb.or([eb('created_at', '<', c[0]), eb.and([eb('created_at', '=', c[0]), eb('payment_id', '<', c[1])])]));
  const rows = await q.orderBy('created_at', 'desc').orderBy('payment_id', 'desc').limit(f.limit + 1).execute();
  const items = rows.slice(0, f.limit);
  const last = items[items.length - 1];
  return { items: items.map(toPayment), next_cursor: rows.length > f.limit ? `${last.created_at}_${last.payment_id}` : null };
}

/** Asks the provider about a payment that is not settled yet, and applies what it says. */
async function reconcile(gw: GatewayContext, paymentId: string) {
  let p = await gw.db.kysely.selectFrom('payments').selectAll().where('payment_id', '=', paymentId).executeTakeFirst();
  if (!p) return undefined;
  if (p.status === 'pending' || p.status === 'creating' || p.status === 'expired') {
    const provider = providers[p.provider];
    if (provider.status(gw).enabled) {
      const f = await provider.readBack(gw, p);
      if (f.paymentId === null || f.paymentId === p.payment_id) {
        const { outcome } = await applyFacts(gw, p.provider, { ...f, paymentId: p.payment_id }, null);
        if (outcome === 'credited') gw.log('info', 'payment credited on read-back', { payment_id: p.payment_id });
        p = (await gw.db.kysely.selectFrom('payments').selectAll().where('payment_id', '=', paymentId).executeTakeFirst())!;
      }
    }
  }
  return p;
}

function webhook(provider: PaymentProvider) {
  return action({
    method: 'POST',
    auth: [],
    body: 'raw',
    maxBodyBytes: WEBHOOK_MAX_BYTES,
    errors: [409],
    summary: `Webhook of ${provider.title} (register ${'{base_url}'}/v1/payment/webhook/${provider.id})`,
    handler: async ({ gateway, request, rawBody }) => {
      const raw = await rawBody();
      const find = (pid: string | null, ref: string | null) => findPayment(gateway.db, provider.id, pid, ref);
      const ev = await provider.verifyWebhook(gateway, raw, request.headers, find);
      if (ev.refund) {
        const r = await applyRefund(gateway, provider.id, ev.refund, ev.eventId, find);
        await recordEvent(gateway.db, provider.id, ev.eventId, ev.type, r.paymentId, r.outcome);
        gateway.log('info', 'payment refund webhook', { provider: provider.name, event_id: ev.eventId, type: ev.type, payment_id: r.paymentId, outcome: r.outcome, shortfall: r.shortfall ?? 0 });
        return { received: true, event_id: ev.eventId, type: ev.type, outcome: r.outcome };
      }
      const { outcome, paymentId } = await applyFacts(gateway, provider.id, ev, ev.eventId);
      await recordEvent(gateway.db, provider.id, ev.eventId, ev.type, paymentId, outcome);
      if (outcome !== 'ignored' && outcome !== 'already_paid' && outcome !== 'no_change') {
        gateway.log('info', 'payment webhook', { provider: provider.name, event_id: ev.eventId, type: ev.type, payment_id: paymentId, outcome });
      }
      return { received: true, event_id: ev.eventId, type: ev.type, outcome };
    },
  });
}

export const paymentService = defineService({
  id: 'payment',
  name: 'Payment',
  description: 'Credit top-ups through provider A (Stripe Checkout) and provider B (Creem hosted checkout).',
  env: [
    { key: 'PAYMENT_A_SECRET_KEY', description: 'Stripe secret key (creates Checkout Sessions).', required: false },
    { key: 'PAYMENT_A_WEBHOOK_SECRET', description: 'Stripe webhook signing secret (whsec_…); without it events are fetched back from Stripe.', required: false },
    { key: 'PAYMENT_A_CURRENCY', description: 'Currency of Stripe checkouts (default usd).', required: false },
    { key: 'PAYMENT_A_API_BASE', description: 'Stripe API base URL override (tests).', required: false },
    { key: 'PAYMENT_B_API_KEY', description: 'Creem API key.', required: false },
    { key: 'PAYMENT_B_PRODUCT_ID', description: 'Creem product sold in units for credits.', required: false },
    { key: 'PAYMENT_B_WEBHOOK_SECRET', description: 'Creem webhook secret; without it checkouts are read back from Creem.', required: false },
    { key: 'PAYMENT_B_CREDITS_PER_UNIT', description: 'Credits per unit of the Creem product (default: its price at PAYMENT_CREDITS_PER_USD).', required: false },
    { key: 'PAYMENT_B_API_BASE', description: 'Creem API base URL override (default by key: test-api or api.creem.io).', required: false },
    { key: 'PAYMENT_CREDITS_PER_USD', description: 'Credits bought per unit of currency (default 1,000,000).', required: false },
    { key: 'PAYMENT_MAX_AMOUNT', description: 'Most one checkout may cost, in minor units (default 1,000,000).', required: false },
    { key: 'GATEWAY_CITY_BASE_URL', description: 'Public base URL for the payment result pages.', required: false },
  ],
  actions: {
    methods: action({
      method: 'GET',
      auth: [],
      summary: 'Payment methods and whether they can be used',
      handler: ({ gateway }) => {
        const rate = creditsPerUsd(gateway);
        return {
          credits_per_usd: rate,
          items: Object.values(providers).map((p) => {
            const s = p.status(gateway);
            return { method: p.id, provider: p.name, name: p.title, enabled: s.enabled, ...(s.reason ? { reason: s.reason } : {}), webhook_verification: s.verification };
          }),
        };
      },
    }),
    checkout: action({
      method: 'POST',
      auth: ['user'],
      ipLimited: true,
      summary: 'Start a top-up: a pending payment and the provider’s checkout URL',
      errors: [502, 504],
      input: z.object({
        city_id: z.string().optional(),
        method: z.enum(['a', 'b', 'stripe', 'creem']),
        credits: z.number().int().min(1).max(1e13),
        return_to: z.string().max(2048).optional().describe("a page on the gateway's own public origin (e.g. the users' page) the buyer returns to after paying or cancelling"),
      }),
      handler: async ({ gateway, identity, input, request }) => {
        const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
        const provider = byName[input.method];
        const status = provider.status(gateway);
        if (!status.enabled) throw badRequest('payment_method_disabled', `Payment method ${provider.id} (${provider.title}) is not available: ${status.reason}.`, 'method');
        const origin = gateway.publicOrigin(request); // 503 when the public URL is not known: before anything is written
        const back = input.return_to === undefined ? '' : `&return_to=${encodeURIComponent(returnPath(input.return_to, origin))}`;
        const q = await provider.quote(gateway, input.credits);
        const at = Date.now();
        const row = {
          payment_id: newId('pay', 12),
          city_id: cityId,
          user_id: userId,
          provider: provider.id,
          status: 'creating' as const,
          credits: q.credits,
          amount: q.amount,
          currency: q.currency,
          units: q.units,
          provider_ref: null,
          checkout_url: null,
          credit_entry: null,
          event_id: null,
          amount_paid: null,
          credited: null,
          shortfall: null,
          error: null,
          created_at: at,
          updated_at: at,
          paid_at: null,
        };
        await gateway.db.kysely.insertInto('payments').values(row).execute();
        const q2 = `payment_id=${encodeURIComponent(row.payment_id)}${back}`;
        let created: { ref: string; url: string };
        try {
          created = await provider.createCheckout(gateway, row, {
            success: `${origin}/v1/payment/redirect/success?${q2}`,
            cancel: `${origin}/v1/payment/redirect/cancel?${q2}`,
          });
        } catch (e) {
          await gateway.db.kysely
            .updateTable('payments')
            .set({ status: 'failed', error: String((e as Error).message ?? e).slice(0, 500), updated_at: Date.now() })
            .where('payment_id', '=', row.payment_id)
            .where('status', '=', 'creating')
            .execute();
          throw e;
        }
        await gateway.db.kysely
          .updateTable('payments')
          .set((eb) => ({
            provider_ref: eb.fn.coalesce('provider_ref', eb.val(created.ref)),
            checkout_url: created.url,
            status: sql<PaymentsTable['status']>`CASE WHEN status = 'creating' THEN 'pending' ELSE status END`,
            updated_at: Date.now(),
          }))
          .where('payment_id', '=', row.payment_id)
          .execute();
        return {
          payment_id: row.payment_id,
          checkout_url: created.url,
          method: provider.id,
          provider: provider.name,
          status: 'pending',
          credits: q.credits,
          amount: q.amount,
          currency: q.currency,
          units: q.units,
        };
      },
    }),
    'redirect/success': action({
      method: 'GET',
      auth: [],
      summary: 'Page shown after paying (confirms the payment with the provider)',
      produces: ['text/html'],
      input: z.object({ payment_id: z.string().max(100).optional(), return_to: z.string().max(2048).optional() }).loose(),
      handler: async ({ gateway, input, request }) => {
        const id = paymentIdSchema.safeParse(input.payment_id);
        if (!id.success) return page('Payment', 'This link does not name a payment.', 404);
        let p;
        try {
          p = await reconcile(gateway, id.data);
        } catch (e) {
          gateway.log('warn', 'payment read-back failed', { payment_id: id.data, error: String(e) });
          p = await gateway.db.kysely.selectFrom('payments').selectAll().where('payment_id', '=', id.data).executeTakeFirst();
        }
        if (!p) return page('Payment', 'This link does not name a payment.', 404);
        const back = returnUrl(input.return_to, publicOriginOrNull(gateway, request));
        if (back) {
          back.searchParams.set('payment_id', p.payment_id);
          back.searchParams.set('payment_status', p.status === 'creating' ? 'pending' : p.status);
          return new Response(null, { status: 303, headers: { location: back.toString(), 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' } });
        }
        if (p.status === 'paid') return page('Payment received', `Thank you. ${(p.credited ?? p.credits).toLocaleString('en-US')} credits were added to your balance.`);
        if (p.status === 'failed' || p.status === 'expired') return page('Payment not completed', 'This payment did not go through; nothing was charged.');
        return page('Payment processing', 'Thank you. Your payment is being confirmed; the credits appear on your balance as soon as it is.');
      },
    }),
    'redirect/cancel': action({
      method: 'GET',
      auth: [],
      summary: 'Page shown when the buyer leaves the checkout',
      produces: ['text/html'],
      input: z.object({ payment_id: z.string().max(100).optional(), return_to: z.string().max(2048).optional() }).loose(),
      handler: ({ gateway, input, request }) => {
        const back = returnUrl(input.return_to, publicOriginOrNull(gateway, request));
        if (!back) return page('Payment cancelled', 'The checkout was cancelled; nothing was charged.');
        const id = paymentIdSchema.safeParse(input.payment_id);
        if (id.success) back.searchParams.set('payment_id', id.data);
        back.searchParams.set('payment_status', 'cancelled');
        return new Response(null, { status: 303, headers: { location: back.toString(), 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' } });
      },
    }),
    'webhook/a': webhook(stripeProvider),
    'webhook/b': webhook(creemProvider),
    'payments/me': action({
      method: 'GET',
      auth: ['user'],
      summary: 'Payments of the calling user, newest first',
      input: z.object({ city_id: z.string().optional(), status: z.enum(['pending', 'paid', 'expired', 'failed']).optional(), ...pageQuery }),
      handler: async ({ gateway, identity, input }) => {
        const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
        return listPayments(gateway, { cityId, userId, status: input.status, cursor: input.cursor, limit: input.limit });
      },
    }),
    payments: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Payments, newest first (filters: city, user, status)',
      input: z.object({
        city_id: cityIdSchema.optional(),
        user_id: z.string().min(1).max(200).optional(),
        status: z.enum(['pending', 'paid', 'expired', 'failed']).optional(),
        ...pageQuery,
      }),
      handler: async ({ gateway, identity, input }) =>
        listPayments(gateway, { cityId: scopeCity(identity, input.city_id), userId: input.user_id, status: input.status, cursor: input.cursor, limit: input.limit }),
    }),
    refunds: refundsAction,
    'payments/sync': action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Read a payment back from its provider and apply what it says (e.g. after a missed webhook)',
      input: z.object({ payment_id: paymentIdSchema }),
      handler: async ({ gateway, input }) => {
        const p = await reconcile(gateway, input.payment_id);
        if (!p) throw notFound('payment_not_found', `No payment '${input.payment_id}'.`, 'payment_id');
        return toPayment(p);
      },
    }),
  },
});
