// Provider A: Stripe Checkout Sessions, priced from the credits bought; webhooks verified with
// Stripe's signature scheme (5-minute tolerance) on the raw body, or, with no webhook secret,
// by fetching the event back from Stripe's API.
// stripe-node is loaded on first use: a gateway that takes no Stripe payments does not keep its
// ~4 MB of code in memory (issue 11).
import type Stripe from 'stripe';
import type { PaymentsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { badRequest, GatewayError } from '../../kernel/errors.ts';
import { stripeRefundFacts } from './refunds.ts';
import { creditsPerUsd, maxAmount, type Facts, type PaymentProvider, type VerifiedEvent } from './provider.ts';

/** Stripe's minimum charge per currency, in minor units (https://docs.stripe.com/currencies#minimum-and-maximum-charge-amounts). */
const MINIMUM: Record<string, number> = { usd: 50, eur: 50, gbp: 30, cad: 50, aud: 50, chf: 50, nzd: 50, sgd: 50, jpy: 50, dkk: 250, nok: 300, sek: 300 };
const TOLERANCE_S = 300;
const clients = new Map<string, Stripe>();
let sdk: typeof Stripe | null = null;
let crypto: ReturnType<typeof Stripe.createSubtleCryptoProvider> | null = null;

/** The Stripe client of PAYMENT_A_SECRET_KEY (and PAYMENT_A_API_BASE); also used by plans. */
export async function client(gw: GatewayContext): Promise<Stripe> {
  const key = gw.env.get('PAYMENT_A_SECRET_KEY');
  if (!key) throw new GatewayError(503, 'payment_method_disabled', 'Payment method a (Stripe) is not configured: PAYMENT_A_SECRET_KEY is missing.');
  const Stripe = (sdk ??= (await import('stripe')).default);
  const base = gw.env.get('PAYMENT_A_API_BASE') ?? '';
  const id = `${key}\u0000${base}`;
  let c = clients.get(id);
  if (!c) {
    const opts: Stripe.StripeConfig = {
      maxNetworkRetries: 2, // stripe-node retries only what is safe, with idempotency keys on POSTs
      timeout: 20_000,
      httpClient: Stripe.createFetchHttpClient(gw.http.fetch),
    };
    if (base) {
      const u = new URL(base);
      opts.host = u.hostname;
      opts.protocol = u.protocol === 'http:' ? 'http' : 'https';
      opts.port = Number(u.port || (u.protocol === 'http:' ? 80 : 443));
    }
    c = new Stripe(key, opts);
    if (clients.size > 16) clients.clear();
    clients.set(id, c);
  }
  return c;
}

const currencyOf = (gw: GatewayContext) => (gw.env.get('PAYMENT_A_CURRENCY') ?? 'usd').toLowerCase();

function facts(session: Stripe.Checkout.Session, type: string): Facts {
  const paymentId = session.metadata?.payment_id ?? session.client_reference_id ?? null;
  const base = { paymentId, ref: session.id, amountPaid: session.amount_total, currency: session.currency };
  switch (type) {
    case 'checkout.session.completed':
      return { ...base, state: session.payment_status === 'paid' || session.payment_status === 'no_payment_required' ? 'paid' : 'pending' };
    case 'checkout.session.async_payment_succeeded':
      return { ...base, state: 'paid' };
    case 'checkout.session.async_payment_failed':
      return { ...base, state: 'failed' };
    case 'checkout.session.expired':
      return { ...base, state: 'expired' };
    default:
      return { ...base, state: 'ignored' };
  }
}

export const stripeProvider: PaymentProvider = {
  id: 'a',
  name: 'stripe',
  title: 'Stripe',
  status(gw) {
    const verification = gw.env.has('PAYMENT_A_WEBHOOK_SECRET') ? 'signature' : 'api';
    if (!gw.env.has('PAYMENT_A_SECRET_KEY')) return { enabled: false, reason: 'PAYMENT_A_SECRET_KEY is not set', verification };
    return { enabled: true, verification };
  },
  async quote(gw, credits) {
    const currency = currencyOf(gw);
    const rate = creditsPerUsd(gw);
    const amount = Math.ceil((credits * 100) / rate);
    const min = MINIMUM[currency] ?? 50;
    if (amount < min) {
      throw badRequest('amount_too_small', `Stripe charges at least ${min} minor units of ${currency}: buy at least ${Math.ceil((min * rate) / 100)} credits.`, 'credits');
    }
    if (amount > maxAmount(gw)) throw badRequest('amount_too_large', `One checkout may cost at most ${maxAmount(gw)} minor units.`, 'credits');
    return { credits, amount, currency, units: null };
  },
  async createCheckout(gw, p, urls) {
    try {
      const s = await (await client(gw)).checkout.sessions.create(
        {
          mode: 'payment',
          client_reference_id: p.payment_id,
          success_url: urls.success,
          cancel_url: urls.cancel,
          metadata: { payment_id: p.payment_id, city_id: p.city_id, user_id: p.user_id, credits: String(p.credits) },
          line_items: [
            {
              quantity: 1,
              price_data: { currency: p.currency, unit_amount: p.amount, product_data: { name: `${p.credits.toLocaleString('en-US')} credits` } },
            },
          ],
        },
        { idempotencyKey: `checkout:${p.payment_id}` },
      );
      if (!s.url) throw new Error('Stripe returned a session without a URL');
      return { ref: s.id, url: s.url };
    } catch (e) {
      throw upstream(e);
    }
  },
  async verifyWebhook(gw, raw, headers) {
    const event = await verifiedStripeEvent(gw, raw, headers);
    let refund;
    try {
      refund = await stripeRefundFacts(await client(gw), event);
    } catch (e) {
      throw upstream(e);
    }
    if (refund) return { eventId: event.id, type: event.type, paymentId: null, ref: null, state: 'ignored', refund };
    const obj = event.data.object as Stripe.Checkout.Session;
    if (obj?.object !== 'checkout.session') return { eventId: event.id, type: event.type, paymentId: null, ref: null, state: 'ignored' };
    return { eventId: event.id, type: event.type, ...facts(obj, event.type) };
  },
  async readBack(gw, p) {
    if (!p.provider_ref) return { paymentId: p.payment_id, ref: null, state: 'pending' };
    try {
      const s = await (await client(gw)).checkout.sessions.retrieve(p.provider_ref);
      const type = s.status === 'complete' ? 'checkout.session.completed' : s.status === 'expired' ? 'checkout.session.expired' : 'open';
      const f = facts(s, type);
      return f.state === 'ignored' ? { ...f, state: 'pending' } : f;
    } catch (e) {
      throw upstream(e);
    }
  },
};

/**
 * The Stripe event of a webhook delivery: its signature checked on the raw body (5-minute
 * tolerance both ways), or, with no signing secret, fetched back from Stripe's API by its id.
 * Throws 400 invalid_signature / invalid_event / unverified_event. Also used by plans.
 */
export async function verifiedStripeEvent(gw: GatewayContext, raw: Uint8Array, headers: Headers): Promise<Stripe.Event> {
  const secret = gw.env.get('PAYMENT_A_WEBHOOK_SECRET');
  const text = new TextDecoder().decode(raw);
  let event: Stripe.Event;
  if (secret) {
    const sig = headers.get('stripe-signature');
    if (!sig) throw badRequest('invalid_signature', 'The Stripe-Signature header is missing.');
    // Stripe's library checks only the event's age: a timestamp in the future passes it. Both
    // directions are held to the tolerance here (a signed event is not good for later).
    const t = Number(/(?:^|,)\s*t=(\d+)/.exec(sig)?.[1]);
    if (!Number.isFinite(t) || t - Date.now() / 1000 > TOLERANCE_S) {
      throw badRequest('invalid_signature', 'The webhook signature is not valid, or its timestamp is outside the 5-minute tolerance.');
    }
    try {
      const c = await client(gw);
      crypto ??= sdk!.createSubtleCryptoProvider();
      event = await c.webhooks.constructEventAsync(text, sig, secret, TOLERANCE_S, crypto);
    } catch {
      throw badRequest('invalid_signature', 'The webhook signature is not valid, or its timestamp is outside the 5-minute tolerance.');
    }
  } else {
    // No signing secret: trust only what Stripe's API says this event is.
    let id: unknown;
    try {
      id = (JSON.parse(text) as { id?: unknown }).id;
    } catch {
      throw badRequest('invalid_event', 'The webhook body is not JSON.');
    }
    if (typeof id !== 'string' || !/^evt_[A-Za-z0-9_]+$/.test(id)) throw badRequest('invalid_event', 'The webhook body has no event id.');
    try {
      event = await (await client(gw)).events.retrieve(id);
    } catch (e) {
      if (sdk && e instanceof sdk.errors.StripeInvalidRequestError) throw badRequest('unverified_event', 'Stripe does not know this event.');
      throw upstream(e);
    }
  }
  return event;
}

export function upstream(e: unknown): GatewayError {
  if (e instanceof GatewayError) return e;
  // a Stripe error implies the SDK is loaded
  const msg = sdk && e instanceof sdk.errors.StripeError ? e.message : String((e as Error)?.message ?? e);
  return new GatewayError(502, 'payment_provider_error', `Stripe: ${msg}`);
}

export type { VerifiedEvent, PaymentsTable };
