// Stripe API stub for Checkout Sessions, reachable by the `stripe` npm package configured
// with `{ host: "127.0.0.1", port, protocol: "http" }`. Form-encoded bodies with bracket
// nesting, Bearer secret-key auth, Stripe's error envelope, Idempotency-Key replay, signed
// webhook events (Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<payload>">).
import { createHash, createHmac } from "node:crypto";
import { defaultSeed, escapeHtml, html, idFactory, json, startHttpStub, type RecordedRequest, type StubResponse } from "./http.ts";
import { safeEqual } from "./oauth-common.ts";
import { stripeBilling } from "./stripe-billing.ts";

/** Stripe's webhook signature header value for `payload` (the exact raw body that is sent). */
export function signStripePayload(payload: string, secret: string, timestamp: number = Math.floor(Date.now() / 1000)): string {
  const signature = createHmac("sha256", secret).update(`${timestamp}.${payload}`, "utf8").digest("hex");
  return `t=${timestamp},v1=${signature}`;
}

export type StripePrice = { id: string; unit_amount: number; currency: string; product?: string; nickname?: string; recurring?: { interval: string } };

export type StripeEvent = {
  id: string;
  object: "event";
  api_version: string;
  created: number;
  data: { object: StripeCheckoutSession | StripeCharge | StripeDispute | Record<string, unknown>; previous_attributes?: Record<string, unknown> };
  livemode: false;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  type: string;
};

/** The Charge of a paid Checkout Session (what charge.refunded carries). */
export type StripeCharge = Record<string, unknown> & {
  id: string;
  object: "charge";
  amount: number;
  amount_captured: number;
  amount_refunded: number;
  currency: string;
  payment_intent: string;
  refunded: boolean;
};

/** A dispute (chargeback) of a charge (what charge.dispute.created carries). */
export type StripeDispute = Record<string, unknown> & {
  id: string;
  object: "dispute";
  amount: number;
  charge: string;
  currency: string;
  payment_intent: string;
  status: string;
};

export type StripeCheckoutSession = Record<string, unknown> & {
  id: string;
  object: "checkout.session";
  status: "open" | "complete" | "expired";
  payment_status: "paid" | "unpaid" | "no_payment_required";
  amount_total: number | null;
  currency: string | null;
  metadata: Record<string, string>;
  client_reference_id: string | null;
  success_url: string | null;
  cancel_url: string | null;
  url: string | null;
};

export type StripeStubOptions = {
  /** secret key the API accepts (default "sk_test_stub_secret_key") */
  apiKey?: string;
  /** where deliverWebhook / the hosted page's Pay button POST events, and the signing secret */
  webhookUrl?: string;
  webhookSecret?: string;
  /** prices usable as line_items[n][price] */
  prices?: StripePrice[];
  /** api_version stamped on events when the creating request had no Stripe-Version header */
  apiVersion?: string;
  seed?: string;
};

type LineItem = { description: string; quantity: number; unit_amount: number; currency: string; price_id: string; product: string };

type Failure = { status: number; shouldRetry: boolean | undefined };

const KNOWN_CREATE_PARAMS = new Set(
  (
    "adaptive_pricing after_expiration allow_promotion_codes automatic_tax billing_address_collection branding_settings cancel_url " +
    "client_reference_id consent_collection currency custom_fields custom_text customer customer_creation customer_email " +
    "customer_update discounts excluded_payment_method_types expand expires_at invoice_creation line_items locale metadata mode " +
    "name_collection optional_items origin_context payment_intent_data payment_method_collection payment_method_configuration " +
    "payment_method_data payment_method_options payment_method_types permissions phone_number_collection redirect_on_completion " +
    "return_url saved_payment_method_options setup_intent_data shipping_address_collection shipping_options submit_type " +
    "subscription_data success_url tax_id_collection ui_mode wallet_options"
  ).split(" "),
);

const MINIMUM_AMOUNT: Record<string, number> = { usd: 50, eur: 50, gbp: 30, cad: 50, aud: 50, chf: 50 };

class StripeApiError extends Error {
  status: number;
  body: Record<string, unknown>;
  constructor(status: number, body: Record<string, unknown>) {
    super(String(body["message"]));
    this.status = status;
    this.body = body;
  }
}

function invalid(message: string, param?: string, code?: string, status = 400): StripeApiError {
  const body: Record<string, unknown> = { message, type: "invalid_request_error" };
  if (code) {
    body["code"] = code;
    body["doc_url"] = `https://stripe.com/docs/error-codes/${code.replace(/_/g, "-")}`;
  }
  if (param) body["param"] = param;
  return new StripeApiError(status, body);
}

const missing = (param: string) => invalid(`Missing required param: ${param}.`, param, "parameter_missing");

/** Decodes Stripe's form encoding (`a[b][0][c]=v`) into nested objects/arrays of strings. */
export function parseStripeForm(body: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const first = key.indexOf("[");
    const segments = first < 0 ? [key] : [key.slice(0, first), ...[...key.slice(first).matchAll(/\[([^\]]*)\]/g)].map((m) => m[1]!)];
    let node: Record<string, unknown> = root;
    for (let i = 0; i < segments.length; i++) {
      let seg = segments[i]!;
      if (seg === "") seg = String(Object.keys(node).length);
      if (i === segments.length - 1) {
        node[seg] = value;
      } else {
        const child = node[seg];
        if (typeof child !== "object" || child === null) node[seg] = {};
        node = node[seg] as Record<string, unknown>;
      }
    }
  }
  return arrayify(root) as Record<string, unknown>;
}

function arrayify(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj);
  for (const k of keys) obj[k] = arrayify(obj[k]);
  if (keys.length > 0 && keys.every((k, i) => k === String(i))) return keys.map((k) => obj[k]);
  return obj;
}

export type StripeStub = Awaited<ReturnType<typeof startStripeStub>>;

export async function startStripeStub(opts: StripeStubOptions = {}) {
  const apiKey = opts.apiKey ?? "sk_test_stub_secret_key";
  const defaultApiVersion = opts.apiVersion ?? "2026-10-28.endive";
  const nextId = idFactory(opts.seed ?? defaultSeed("stripe"));
  let webhookUrl = opts.webhookUrl;
  let webhookSecret = opts.webhookSecret ?? "whsec_stub_webhook_secret";
  const prices = new Map<string, StripePrice>((opts.prices ?? []).map((p) => [p.id, { ...p, currency: p.currency.toLowerCase() }]));
  const sessions = new Map<string, StripeCheckoutSession>();
  const lineItems = new Map<string, LineItem[]>();
  const events: StripeEvent[] = [];
  const idempotency = new Map<string, { fingerprint: string; response: StubResponse }>();
  const failures: Failure[] = [];
  const deliveries: { event: StripeEvent; url: string; status: number; body: string }[] = [];
  const apiVersions = new Map<string, string>();

  const now = () => Math.floor(Date.now() / 1000);
  // Stripe Billing (subscriptions, invoices, the customer portal): stripe-billing.ts.
  const billing = stripeBilling({
    nextId: (p, l) => nextId(p, l),
    now,
    parse: parseStripeForm,
    origin: () => origin,
    prices,
    event(type, object, previous) {
      const event: StripeEvent = {
        id: nextId("evt_1", 23),
        object: "event",
        api_version: defaultApiVersion,
        created: now(),
        data: previous ? { object, previous_attributes: previous } : { object },
        livemode: false,
        pending_webhooks: 1,
        request: { id: null, idempotency_key: null },
        type,
      };
      events.push(event);
      return event as unknown as Record<string, unknown>;
    },
  });

  function authenticate(req: RecordedRequest): void {
    const header = req.headers["authorization"];
    let key: string | undefined;
    if (header && /^bearer\s+/i.test(header)) key = header.replace(/^bearer\s+/i, "").trim();
    else if (header && /^basic\s+/i.test(header)) key = Buffer.from(header.replace(/^basic\s+/i, ""), "base64").toString("utf8").split(":")[0];
    if (!key) {
      throw new StripeApiError(401, {
        message:
          "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/.",
        type: "invalid_request_error",
      });
    }
    if (!safeEqual(key, apiKey)) {
      const masked = key.length > 12 ? `${key.slice(0, 8)}${"*".repeat(key.length - 12)}${key.slice(-4)}` : "****";
      throw new StripeApiError(401, { message: `Invalid API Key provided: ${masked}`, type: "invalid_request_error" });
    }
  }

  function createSession(req: RecordedRequest): StripeCheckoutSession {
    const p = parseStripeForm(req.body);
    for (const key of Object.keys(p)) {
      if (!KNOWN_CREATE_PARAMS.has(key)) throw invalid(`Received unknown parameter: ${key}`, key, "parameter_unknown");
    }
    const mode = p["mode"];
    if (mode === undefined) throw missing("mode");
    if (mode !== "payment" && mode !== "subscription" && mode !== "setup") {
      throw invalid(`Invalid mode: must be one of payment, setup, or subscription`, "mode", "parameter_invalid_string");
    }
    for (const urlParam of ["success_url", "cancel_url"]) {
      const v = p[urlParam];
      if (v === undefined) continue;
      if (typeof v !== "string" || !URL.canParse(v.replace("{CHECKOUT_SESSION_ID}", "x"))) throw invalid("Not a valid URL", urlParam, "url_invalid");
    }
    const metadata = readMetadata(p["metadata"], "metadata");
    const clientReferenceId = p["client_reference_id"];
    if (clientReferenceId !== undefined && (typeof clientReferenceId !== "string" || clientReferenceId.length > 200)) {
      throw invalid("Invalid string: client_reference_id must be at most 200 characters", "client_reference_id", "parameter_invalid_string");
    }
    const rawItems = p["line_items"];
    if (rawItems !== undefined && !Array.isArray(rawItems)) throw invalid("Invalid array", "line_items", "parameter_invalid_array");
    const items: LineItem[] = ((rawItems as unknown[] | undefined) ?? []).map((raw, i) => readLineItem(raw, i));
    if (mode !== "setup" && items.length === 0) throw invalid(`\`line_items\` is required in \`${mode}\` mode.`, "line_items", "parameter_missing");
    const currencies = new Set(items.map((it) => it.currency));
    if (currencies.size > 1) throw invalid("All line items must use the same currency.", "line_items", "parameter_invalid_string");
    const currency = items[0]?.currency ?? (typeof p["currency"] === "string" ? p["currency"].toLowerCase() : null);
    const amount = items.reduce((sum, it) => sum + it.unit_amount * it.quantity, 0);
    if (mode === "payment" && currency !== null && amount < (MINIMUM_AMOUNT[currency] ?? 1)) {
      throw invalid(
        `The Checkout Session's total amount due must add up to at least ${((MINIMUM_AMOUNT[currency] ?? 1) / 100).toFixed(2)} ${currency}`,
        undefined,
        "amount_too_small",
      );
    }
    const created = now();
    const expiresAt = typeof p["expires_at"] === "string" ? Number(p["expires_at"]) : created + 24 * 3600;
    const id = nextId("cs_test_a1", 56);
    const session: StripeCheckoutSession = {
      id,
      object: "checkout.session",
      adaptive_pricing: null,
      after_expiration: null,
      allow_promotion_codes: p["allow_promotion_codes"] === "true" ? true : null,
      amount_subtotal: mode === "setup" ? null : amount,
      amount_total: mode === "setup" ? null : amount,
      automatic_tax: { enabled: false, liability: null, provider: null, status: null },
      billing_address_collection: (p["billing_address_collection"] as string | undefined) ?? null,
      cancel_url: (p["cancel_url"] as string | undefined) ?? null,
      client_reference_id: (clientReferenceId as string | undefined) ?? null,
      client_secret: null,
      collected_information: null,
      consent: null,
      consent_collection: null,
      created,
      currency,
      custom_fields: [],
      custom_text: { after_submit: null, shipping_address: null, submit: null, terms_of_service_acceptance: null },
      customer: (p["customer"] as string | undefined) ?? null,
      customer_creation: p["customer"] === undefined ? ((p["customer_creation"] as string | undefined) ?? "if_required") : null,
      customer_details: null,
      customer_email: (p["customer_email"] as string | undefined) ?? null,
      discounts: [],
      expires_at: expiresAt,
      invoice: null,
      invoice_creation: null,
      livemode: false,
      locale: (p["locale"] as string | undefined) ?? null,
      metadata,
      mode,
      payment_intent: null,
      payment_link: null,
      payment_method_collection: mode === "payment" ? null : "always",
      payment_method_configuration_details: null,
      payment_method_options: {},
      payment_method_types: Array.isArray(p["payment_method_types"]) ? (p["payment_method_types"] as string[]) : ["card"],
      payment_status: mode === "setup" ? "no_payment_required" : "unpaid",
      phone_number_collection: { enabled: false },
      recovered_from: null,
      saved_payment_method_options: null,
      setup_intent: null,
      shipping_address_collection: null,
      shipping_cost: null,
      shipping_options: [],
      status: "open",
      submit_type: (p["submit_type"] as string | undefined) ?? null,
      subscription: null,
      success_url: (p["success_url"] as string | undefined) ?? null,
      total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 0 },
      ui_mode: (p["ui_mode"] as string | undefined) ?? "hosted",
      url: `${origin}/c/pay/${id}`,
      wallet_options: null,
    };
    sessions.set(id, session);
    lineItems.set(id, items);
    apiVersions.set(id, req.headers["stripe-version"] ?? defaultApiVersion);
    return session;
  }

  function readMetadata(raw: unknown, param: string): Record<string, string> {
    if (raw === undefined || raw === "") return {};
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw invalid("Invalid object", param, "parameter_invalid_object");
    const out: Record<string, string> = {};
    const entries = Object.entries(raw as Record<string, unknown>);
    if (entries.length > 50) throw invalid("Invalid metadata: metadata can have up to 50 keys", param, "parameter_invalid_object");
    for (const [k, v] of entries) {
      if (typeof v !== "string") throw invalid("Invalid object", `${param}[${k}]`, "parameter_invalid_object");
      if (k.length > 40) throw invalid(`Metadata keys can be at most 40 characters long.`, `${param}[${k}]`, "parameter_invalid_string");
      if (v.length > 500) throw invalid(`Metadata values can be at most 500 characters long.`, `${param}[${k}]`, "parameter_invalid_string");
      if (v !== "") out[k] = v;
    }
    return out;
  }

  function readLineItem(raw: unknown, i: number): LineItem {
    const at = `line_items[${i}]`;
    if (typeof raw !== "object" || raw === null) throw invalid("Invalid object", at, "parameter_invalid_object");
    const item = raw as Record<string, unknown>;
    if (item["quantity"] === undefined) throw missing(`${at}[quantity]`);
    const quantity = Number(item["quantity"]);
    if (!Number.isInteger(quantity) || quantity < 1) throw invalid("Invalid positive integer", `${at}[quantity]`, "parameter_invalid_integer");
    if (typeof item["price"] === "string") {
      const price = prices.get(item["price"]);
      if (!price) throw invalid(`No such price: '${item["price"]}'`, `${at}[price]`, "resource_missing");
      return { description: price.nickname ?? price.id, quantity, unit_amount: price.unit_amount, currency: price.currency, price_id: price.id, product: price.product ?? `prod_${price.id}` };
    }
    const pd = item["price_data"] as Record<string, unknown> | undefined;
    if (typeof pd !== "object" || pd === null) throw invalid(`You must specify either \`price\` or \`price_data\` in ${at}.`, `${at}[price]`, "parameter_missing");
    if (typeof pd["currency"] !== "string") throw missing(`${at}[price_data][currency]`);
    let description: string;
    let product: string;
    if (typeof pd["product"] === "string") {
      product = pd["product"];
      description = product;
    } else if (typeof pd["product_data"] === "object" && pd["product_data"] !== null) {
      const productData = pd["product_data"] as Record<string, unknown>;
      if (typeof productData["name"] !== "string" || productData["name"] === "") throw missing(`${at}[price_data][product_data][name]`);
      description = productData["name"];
      product = nextId("prod_", 14);
    } else {
      throw missing(`${at}[price_data][product_data]`);
    }
    const rawAmount = pd["unit_amount"] ?? pd["unit_amount_decimal"];
    if (rawAmount === undefined) throw missing(`${at}[price_data][unit_amount]`);
    const unitAmount = Number(rawAmount);
    if (!Number.isFinite(unitAmount) || unitAmount < 0) throw invalid("Invalid integer", `${at}[price_data][unit_amount]`, "parameter_invalid_integer");
    return { description, quantity, unit_amount: unitAmount, currency: pd["currency"].toLowerCase(), price_id: nextId("price_", 24), product };
  }

  function getSession(id: string): StripeCheckoutSession {
    const s = sessions.get(id);
    if (!s) throw invalid(`No such checkout.session: '${id}'`, "session", "resource_missing", 404);
    return s;
  }

  function makeEvent(type: string, session: StripeCheckoutSession, previous?: Record<string, unknown>): StripeEvent {
    const event: StripeEvent = {
      id: nextId("evt_1", 23),
      object: "event",
      api_version: apiVersions.get(session.id) ?? defaultApiVersion,
      created: now(),
      data: previous ? { object: structuredClone(session), previous_attributes: previous } : { object: structuredClone(session) },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    };
    events.push(event);
    return event;
  }

  const charges = new Map<string, StripeCharge>(); // by session id
  /** Events a subscription-mode session's payment made (subscription created, first invoice paid). */
  const subscriptionEvents = new Map<string, Record<string, unknown>[]>();

  function objectEvent(type: string, object: StripeCharge | StripeDispute, sessionId: string, previous?: Record<string, unknown>): StripeEvent {
    const event: StripeEvent = {
      id: nextId("evt_1", 23),
      object: "event",
      api_version: apiVersions.get(sessionId) ?? defaultApiVersion,
      created: now(),
      data: previous ? { object: structuredClone(object), previous_attributes: previous } : { object: structuredClone(object) },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    };
    events.push(event);
    return event;
  }

  function chargeOf(sessionId: string): StripeCharge {
    const s = sessions.get(sessionId);
    if (!s || s.payment_status !== "paid" || typeof s["payment_intent"] !== "string") throw new Error(`stripe stub: session ${sessionId} is not paid`);
    let c = charges.get(sessionId);
    if (!c) {
      c = {
        id: nextId("ch_3", 21),
        object: "charge",
        amount: s.amount_total ?? 0,
        amount_captured: s.amount_total ?? 0,
        amount_refunded: 0,
        balance_transaction: nextId("txn_3", 21),
        captured: true,
        created: now(),
        currency: s.currency ?? "usd",
        customer: null,
        description: null,
        disputed: false,
        livemode: false,
        metadata: {},
        paid: true,
        payment_intent: s["payment_intent"] as string,
        payment_method: nextId("pm_1", 23),
        receipt_url: `${origin}/receipts/${sessionId}`,
        refunded: false,
        status: "succeeded",
      };
      charges.set(sessionId, c);
    }
    return c;
  }

  /** Refunds `amount` more of the session's charge (default: the rest) → charge.refunded with the Charge. */
  function refund(sessionId: string, amount?: number): StripeEvent {
    const c = chargeOf(sessionId);
    const previous = { amount_refunded: c.amount_refunded, refunded: c.refunded };
    c.amount_refunded = Math.min(c.amount_captured, c.amount_refunded + (amount ?? c.amount_captured - c.amount_refunded));
    c.refunded = c.amount_refunded >= c.amount_captured;
    return objectEvent("charge.refunded", c, sessionId, previous);
  }

  /** Opens a dispute for the session's charge → charge.dispute.created with the Dispute. */
  function dispute(sessionId: string): StripeEvent {
    const c = chargeOf(sessionId);
    c.disputed = true;
    const d: StripeDispute = {
      id: nextId("dp_1", 23),
      object: "dispute",
      amount: c.amount_captured - c.amount_refunded,
      balance_transactions: [],
      charge: c.id,
      created: now(),
      currency: c.currency,
      evidence_details: { due_by: now() + 7 * 86400, has_evidence: false, past_due: false, submission_count: 0 },
      is_charge_refundable: false,
      livemode: false,
      metadata: {},
      payment_intent: c.payment_intent,
      reason: "fraudulent",
      status: "needs_response",
    };
    return objectEvent("charge.dispute.created", d, sessionId);
  }

  /** `discount`: minor units taken off at payment (a promotion code): amount_total drops by it, as Stripe reports. */
  function complete(id: string, customer: { email?: string; name?: string } = {}, opts: { discount?: number } = {}): StripeEvent {
    const s = sessions.get(id);
    if (!s) throw new Error(`stripe stub: no checkout session ${id}`);
    if (s.status !== "open") throw new Error(`stripe stub: session ${id} is ${s.status}, not open`);
    if (opts.discount && s.amount_total !== null) {
      const off = Math.min(opts.discount, s.amount_total);
      s.amount_total -= off;
      s["total_details"] = { amount_discount: off, amount_shipping: 0, amount_tax: 0 };
    }
    s.status = "complete";
    s.payment_status = s.mode === "setup" ? "no_payment_required" : "paid";
    s.url = null;
    s["payment_intent"] = s.mode === "payment" ? nextId("pi_3", 21) : null;
    if (s.mode === "subscription") subscriptionEvents.set(id, billing.completeSubscription(s));
    s["customer_details"] = {
      address: { city: null, country: "US", line1: null, line2: null, postal_code: "94103", state: null },
      business_name: null,
      email: customer.email ?? (s["customer_email"] as string | null) ?? "buyer@example.com",
      individual_name: null,
      name: customer.name ?? "Test Buyer",
      phone: null,
      tax_exempt: "none",
      tax_ids: [],
    };
    return makeEvent("checkout.session.completed", s);
  }

  function expire(id: string): StripeEvent {
    const s = sessions.get(id);
    if (!s) throw new Error(`stripe stub: no checkout session ${id}`);
    if (s.status !== "open") throw new Error(`stripe stub: session ${id} is ${s.status}, not open`);
    s.status = "expired";
    s.url = null;
    return makeEvent("checkout.session.expired", s);
  }

  async function deliverWebhook(
    event: StripeEvent,
    options: { url?: string; secret?: string; timestamp?: number; signature?: string } = {},
  ): Promise<{ status: number; body: string }> {
    const url = options.url ?? webhookUrl;
    if (!url) throw new Error("stripe stub: no webhook URL (pass { url } or setWebhook)");
    const payload = JSON.stringify(event, null, 2);
    const signature = options.signature ?? signStripePayload(payload, options.secret ?? webhookSecret, options.timestamp);
    const res = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json; charset=utf-8",
        "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        "cache-control": "no-cache",
        accept: "*/*; q=0.5, application/xml",
        "stripe-signature": signature,
      },
      body: payload,
    });
    const body = await res.text();
    deliveries.push({ event, url, status: res.status, body });
    return { status: res.status, body };
  }

  function listLineItems(id: string) {
    const items = lineItems.get(getSession(id).id) ?? [];
    return {
      object: "list",
      data: items.map((it, i) => ({
        id: `li_${id.slice(-20)}${i}`,
        object: "item",
        amount_discount: 0,
        amount_subtotal: it.unit_amount * it.quantity,
        amount_tax: 0,
        amount_total: it.unit_amount * it.quantity,
        currency: it.currency,
        description: it.description,
        price: { id: it.price_id, object: "price", currency: it.currency, product: it.product, unit_amount: it.unit_amount, type: "one_time" },
        quantity: it.quantity,
      })),
      has_more: false,
      url: `/v1/checkout/sessions/${id}/line_items`,
    };
  }

  function hostedPage(req: RecordedRequest, id: string): StubResponse | Promise<StubResponse> {
    const s = sessions.get(id);
    if (!s) return html(404, "<h1>Something went wrong</h1><p>The page you were looking for could not be found.</p>");
    const action = req.query["action"] ?? (req.method === "POST" ? "pay" : undefined);
    if (action === "cancel") return { status: 303, headers: { location: s.cancel_url ?? origin }, body: "" };
    if (action === "pay") {
      if (s.status !== "open") return html(410, "<h1>This Checkout Session is no longer active</h1>");
      const event = complete(id);
      const finish = (): StubResponse => ({ status: 303, headers: { location: (s.success_url ?? origin).replace("{CHECKOUT_SESSION_ID}", id) }, body: "" });
      return webhookUrl ? deliverWebhook(event).then(finish, finish) : finish();
    }
    const amount = s.amount_total === null ? "" : `${(s.amount_total / 100).toFixed(2)} ${String(s.currency).toUpperCase()}`;
    return html(
      200,
      `<!doctype html><title>Stripe Checkout (stub)</title><h1>Pay ${escapeHtml(amount)}</h1><p id="status">${escapeHtml(s.status)}</p>` +
        `<form method="post" action="/c/pay/${escapeHtml(id)}"><button id="pay" type="submit">Pay</button></form>` +
        `<a id="cancel" href="/c/pay/${escapeHtml(id)}?action=cancel">Cancel</a>`,
    );
  }

  async function route(req: RecordedRequest): Promise<StubResponse> {
    const page = /^\/c\/pay\/([^/]+)$/.exec(req.path);
    if (page) return hostedPage(req, decodeURIComponent(page[1]!));

    authenticate(req);
    const failure = failures.shift();
    if (failure) {
      const headers: Record<string, string> = {};
      if (failure.shouldRetry !== undefined) headers["stripe-should-retry"] = String(failure.shouldRetry);
      return json(failure.status, { error: { message: "An unknown error occurred (injected by stub)", type: "api_error" } }, headers);
    }

    if (req.method === "POST") {
      const key = req.headers["idempotency-key"];
      if (key !== undefined) {
        const fingerprint = createHash("sha256").update(`${req.path}\n${req.body}`).digest("hex");
        const seen = idempotency.get(key);
        if (seen) {
          if (seen.fingerprint !== fingerprint) {
            throw new StripeApiError(400, {
              message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
              type: "idempotency_error",
            });
          }
          return { ...seen.response, headers: { ...seen.response.headers, "idempotent-replayed": "true" } };
        }
        const response = await handle(req);
        if (response.status < 500) idempotency.set(key, { fingerprint, response });
        return { ...response, headers: { ...response.headers, "idempotency-key": key } };
      }
    }
    return handle(req);
  }

  async function handle(req: RecordedRequest): Promise<StubResponse> {
    const { method, path } = req;
    if (path === "/v1/checkout/sessions" && method === "POST") {
      const session = createSession(req);
      billing.onSessionCreate(session, parseStripeForm(req.body));
      return json(200, session);
    }
    const billed = billing.handle(req);
    if (billed) return billed;
    if (path === "/v1/checkout/sessions" && method === "GET") {
      const data = [...sessions.values()].reverse().filter((s) => {
        const q = req.query;
        return (q["payment_intent"] === undefined || s["payment_intent"] === q["payment_intent"]) && (q["status"] === undefined || s.status === q["status"]);
      });
      return json(200, { object: "list", data, has_more: false, url: "/v1/checkout/sessions" });
    }
    let m = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(path);
    if (m && method === "GET") return json(200, getSession(decodeURIComponent(m[1]!)));
    m = /^\/v1\/checkout\/sessions\/([^/]+)\/line_items$/.exec(path);
    if (m && method === "GET") return json(200, listLineItems(decodeURIComponent(m[1]!)));
    m = /^\/v1\/checkout\/sessions\/([^/]+)\/expire$/.exec(path);
    if (m && method === "POST") {
      const s = getSession(decodeURIComponent(m[1]!));
      if (s.status !== "open") throw invalid(`Only Checkout Sessions with a status in ["open"] can be expired.`, undefined, "checkout_session_not_open");
      expire(s.id);
      return json(200, s);
    }
    m = /^\/v1\/events\/([^/]+)$/.exec(path);
    if (m && method === "GET") {
      const event = events.find((e) => e.id === decodeURIComponent(m![1]!));
      if (!event) throw invalid(`No such event: '${decodeURIComponent(m[1]!)}'`, "id", "resource_missing", 404);
      return json(200, event);
    }
    throw new StripeApiError(404, {
      message: `Unrecognized request URL (${method}: ${path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
      type: "invalid_request_error",
    });
  }

  const http = await startHttpStub(async (req) => {
    const requestId = nextId("req_", 14);
    try {
      const res = await route(req);
      return { ...res, headers: { "request-id": requestId, "stripe-version": req.headers["stripe-version"] ?? defaultApiVersion, ...res.headers } };
    } catch (error) {
      if (error instanceof StripeApiError) {
        const body = { ...error.body, request_log_url: `https://dashboard.stripe.com/test/logs/${requestId}?t=${now()}` };
        return json(error.status, { error: body }, { "request-id": requestId });
      }
      throw error;
    }
  });
  const origin = http.origin;

  return {
    origin,
    /** for `new Stripe(apiKey, { host, port, protocol: "http" })` */
    host: "127.0.0.1",
    port: http.port,
    protocol: "http" as const,
    apiKey,
    get webhookSecret() {
      return webhookSecret;
    },
    get webhookUrl() {
      return webhookUrl;
    },
    requests: http.requests,
    sessions,
    events,
    /** webhook POSTs made by deliverWebhook / the hosted page, with the receiver's answer */
    deliveries,
    /** checkout.session.created by the API so far (recorded POST bodies are in `requests`) */
    get sessionCount() {
      return sessions.size;
    },
    getSession(id: string): StripeCheckoutSession | undefined {
      return sessions.get(id);
    },
    addPrice(price: StripePrice) {
      prices.set(price.id, { ...price, currency: price.currency.toLowerCase() });
    },
    /** marks the session paid/complete and returns the checkout.session.completed event (not delivered) */
    completeSession: complete,
    /** marks the session expired and returns the checkout.session.expired event (not delivered) */
    expireSession: expire,
    /** POSTs the event as Stripe does (pretty JSON body, Stripe-Signature header) */
    deliverWebhook,
    /** refunds (part of) a paid session's charge and returns the charge.refunded event (not delivered) */
    refundSession: refund,
    /** disputes a paid session's charge and returns the charge.dispute.created event (not delivered) */
    disputeSession: dispute,
    /** Stripe Billing: subscriptions, invoices, portal sessions, and the events of their lifecycle (not delivered) */
    billing,
    /** the events a paid subscription-mode session made besides checkout.session.completed */
    subscriptionEventsOf: (sessionId: string) => (subscriptionEvents.get(sessionId) ?? []) as unknown as StripeEvent[],
    /** completeSession + deliverWebhook to the configured URL */
    async pay(id: string, customer?: { email?: string; name?: string }) {
      const event = complete(id, customer);
      const delivery = await deliverWebhook(event);
      return { event, ...delivery };
    },
    setWebhook(url: string | undefined, secret?: string) {
      webhookUrl = url;
      if (secret !== undefined) webhookSecret = secret;
    },
    /** the next `times` API calls answer `status` (default 500) with a Stripe api_error; stripe-node retries 5xx itself */
    failNext(status = 500, options: { times?: number; shouldRetry?: boolean } = {}) {
      for (let i = 0; i < (options.times ?? 1); i++) failures.push({ status, shouldRetry: options.shouldRetry });
    },
    close: http.close,
  };
}
