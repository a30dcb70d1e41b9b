// Provider B: Creem hosted checkout for one product (PAYMENT_B_PRODUCT_ID) bought in units.
// Webhooks are verified with `creem-signature` (hex HMAC-SHA256 of the raw body) when
// PAYMENT_B_WEBHOOK_SECRET is set; otherwise the body is only a hint, and what counts is the
// checkout as Creem's API returns it.
import { creemRefundFacts } from './refunds.ts';
import type { PaymentsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { hex, safeEqual } from '../../kernel/crypto.ts';
import { badRequest, GatewayError } from '../../kernel/errors.ts';
import { creditsPerUsd, maxAmount, type Facts, type PaymentProvider } from './provider.ts';

const PRODUCT_TTL_MS = 5 * 60_000;
const products = new Map<string, { at: number; price: number; currency: string }>();
const enc = new TextEncoder();

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {});
const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

function config(gw: GatewayContext) {
  const key = gw.env.get('PAYMENT_B_API_KEY');
  const product = gw.env.get('PAYMENT_B_PRODUCT_ID');
  if (!key || !product) {
    throw new GatewayError(503, 'payment_method_disabled', 'Payment method b (Creem) is not configured: PAYMENT_B_API_KEY and PAYMENT_B_PRODUCT_ID are needed.');
  }
  const base = (gw.env.get('PAYMENT_B_API_BASE') ?? (key.startsWith('creem_test_') ? 'https://test-api.creem.io' : 'https://api.creem.io')).replace(/\/+$/, '');
  return { key, product, base };
}

async function api(gw: GatewayContext, method: 'GET' | 'POST', path: string, body?: Json): Promise<{ status: number; json: Json }> {
  const c = config(gw);
  let res: Response;
  try {
    res = await gw.http.fetch(c.base + path, {
      method,
      headers: { 'x-api-key': c.key, accept: 'application/json', ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(20_000),
    });
  } catch (e) {
    throw new GatewayError(502, 'payment_provider_error', `Creem is unreachable: ${(e as Error).message}`);
  }
  const text = await res.text();
  let json: Json = {};
  try {
    json = obj(JSON.parse(text));
  } catch {
    /* not JSON */
  }
  return { status: res.status, json };
}

function failure(status: number, json: Json): GatewayError {
  const m = json.message;
  const detail = Array.isArray(m) ? m.join('; ') : str(m) ?? str(json.error) ?? `HTTP ${status}`;
  return new GatewayError(502, 'payment_provider_error', `Creem: ${detail}`);
}

async function product(gw: GatewayContext): Promise<{ price: number; currency: string }> {
  const c = config(gw);
  const id = `${c.base}\u0000${c.product}`;
  const hit = products.get(id);
  if (hit && Date.now() - hit.at < PRODUCT_TTL_MS) return hit;
  const r = await api(gw, 'GET', `/v1/products?product_id=${encodeURIComponent(c.product)}`);
  if (r.status !== 200) throw failure(r.status, r.json);
  const price = Number(r.json.price);
  const currency = str(r.json.currency)?.toLowerCase();
  if (!Number.isSafeInteger(price) || price <= 0 || !currency) throw new GatewayError(502, 'payment_provider_error', 'Creem: the product has no usable price.');
  const p = { at: Date.now(), price, currency };
  products.set(id, p);
  return p;
}

/** What a checkout object (from the API, or a verified webhook) says. */
function checkoutFacts(o: Json): Facts {
  const order = obj(o.order);
  const meta = obj(o.metadata);
  const status = str(o.status);
  const paid = status === 'completed' && str(order.status) === 'paid';
  return {
    paymentId: str(o.request_id) ?? str(meta.payment_id),
    ref: str(o.id),
    state: paid ? 'paid' : status === 'expired' ? 'expired' : 'pending',
    // What the buyer paid: after discounts (amount_paid), not the list price (amount).
    amountPaid: [order.amount_paid, order.amount_due, order.amount].find((v): v is number => typeof v === 'number') ?? null,
    currency: str(order.currency)?.toLowerCase() ?? null,
  };
}

/** Hex HMAC-SHA256 of a webhook body (creem-signature); also used by plans. */
export async function hmacHex(secret: string, data: Uint8Array): Promise<string> {
  const key = await crypto.subtle.importKey('raw', enc.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return hex(await crypto.subtle.sign('HMAC', key, data as Uint8Array<ArrayBuffer>));
}

async function readCheckout(gw: GatewayContext, checkoutId: string): Promise<Json | null> {
  const r = await api(gw, 'GET', `/v1/checkouts?checkout_id=${encodeURIComponent(checkoutId)}`);
  if (r.status === 404) return null;
  if (r.status !== 200) throw failure(r.status, r.json);
  return r.json;
}

export const creemProvider: PaymentProvider = {
  id: 'b',
  name: 'creem',
  title: 'Creem',
  status(gw) {
    const verification = gw.env.has('PAYMENT_B_WEBHOOK_SECRET') ? 'signature' : 'api';
    const missing = ['PAYMENT_B_API_KEY', 'PAYMENT_B_PRODUCT_ID'].filter((k) => !gw.env.has(k));
    if (missing.length) return { enabled: false, reason: `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not set`, verification };
    return { enabled: true, verification };
  },
  async quote(gw, credits) {
    const p = await product(gw);
    const configured = Number(gw.env.get('PAYMENT_B_CREDITS_PER_UNIT') ?? NaN);
    const perUnit = Number.isSafeInteger(configured) && configured > 0 ? configured : Math.floor((p.price * creditsPerUsd(gw)) / 100);
    if (perUnit <= 0) throw new GatewayError(502, 'payment_provider_error', 'Creem: the product buys no credits.');
    const units = Math.max(1, Math.ceil(credits / perUnit));
    const amount = units * p.price;
    if (amount > maxAmount(gw)) throw badRequest('amount_too_large', `One checkout may cost at most ${maxAmount(gw)} minor units.`, 'credits');
    return { credits: units * perUnit, amount, currency: p.currency, units };
  },
  async createCheckout(gw, p: PaymentsTable, urls) {
    const c = config(gw);
    const r = await api(gw, 'POST', '/v1/checkouts', {
      product_id: c.product,
      request_id: p.payment_id,
      units: p.units ?? 1,
      success_url: urls.success,
      metadata: { payment_id: p.payment_id, city_id: p.city_id, user_id: p.user_id, credits: String(p.credits) },
    });
    if (r.status !== 200) throw failure(r.status, r.json);
    const ref = str(r.json.id);
    const url = str(r.json.checkout_url);
    if (!ref || !url) throw new GatewayError(502, 'payment_provider_error', 'Creem returned a checkout without an id or URL.');
    return { ref, url };
  },
  async verifyWebhook(gw, raw, headers, find) {
    const secret = gw.env.get('PAYMENT_B_WEBHOOK_SECRET');
    let body: Json;
    if (secret) {
      const sig = headers.get('creem-signature') ?? '';
      if (!/^[0-9a-fA-F]{64}$/.test(sig) || !(await safeEqual(sig.toLowerCase(), await hmacHex(secret, raw)))) {
        throw badRequest('invalid_signature', 'The creem-signature header does not match the body.');
      }
    }
    try {
      body = obj(JSON.parse(new TextDecoder().decode(raw)));
    } catch {
      throw badRequest('invalid_event', 'The webhook body is not JSON.');
    }
    const eventId = str(body.id) ?? 'unknown';
    const type = str(body.eventType) ?? 'unknown';
    const o = obj(body.object);
    const refund = creemRefundFacts(type, o);
    if (refund) {
      // Creem has no API to read a refund back: only a signed event may debit credits.
      if (!secret) {
        gw.log('warn', 'creem refund ignored: set PAYMENT_B_WEBHOOK_SECRET to act on refunds', { event_id: eventId });
        return { eventId, type, paymentId: null, ref: null, state: 'ignored' };
      }
      return { eventId, type, paymentId: null, ref: null, state: 'ignored', refund };
    }
    if (type !== 'checkout.completed') return { eventId, type, paymentId: null, ref: null, state: 'ignored' };
    if (secret) return { eventId, type, ...checkoutFacts(o) };
    // Unsigned: the body only names the checkout; Creem's API says what it is.
    const hinted = checkoutFacts(o);
    const payment = await find(hinted.paymentId, hinted.ref);
    const checkoutId = payment?.provider_ref ?? hinted.ref;
    if (!checkoutId) throw badRequest('unverified_event', 'The event names no checkout.');
    const read = await readCheckout(gw, checkoutId);
    if (!read) throw badRequest('unverified_event', 'Creem does not know this checkout.');
    const f = checkoutFacts(read);
    if (f.state !== 'paid') throw new GatewayError(409, 'not_confirmed', 'Creem does not (yet) report this checkout as paid.');
    return { eventId, type, ...f };
  },
  async readBack(gw, p) {
    if (!p.provider_ref) return { paymentId: p.payment_id, ref: null, state: 'pending' };
    const read = await readCheckout(gw, p.provider_ref);
    if (!read) return { paymentId: p.payment_id, ref: p.provider_ref, state: 'pending' };
    return checkoutFacts(read);
  },
};
