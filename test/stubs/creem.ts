// Creem API stub (stands for https://api.creem.io / https://test-api.creem.io): `x-api-key`
// auth, JSON bodies, Creem's error envelope, hosted checkout by product id, and the
// `checkout.completed` webhook signed with `creem-signature` (hex HMAC-SHA256 of the raw body).
import { createHash, createHmac } from "node:crypto";
import { defaultSeed, escapeHtml, html, idFactory, json, startHttpStub, type RecordedRequest, type StubResponse } from "./http.ts";
import { safeEqual } from "./oauth-common.ts";
import { creemBilling } from "./creem-billing.ts";

/** The `creem-signature` header value for a webhook body: hex HMAC-SHA256 of the raw body with the webhook secret. */
export function signCreemPayload(payload: string, secret: string): string {
  return createHmac("sha256", secret).update(payload, "utf8").digest("hex");
}

/**
 * The `signature` query parameter Creem adds to the success_url redirect: SHA-256 hex of
 * `k1=v1|k2=v2|…|salt=<api key>` over the redirect parameters in the order they appear,
 * skipping null/empty values.
 */
export function signCreemRedirect(params: Record<string, string | null | undefined>, apiKey: string): string {
  const data = Object.entries(params)
    .filter(([key, value]) => key !== "signature" && value !== null && value !== undefined && value !== "")
    .map(([key, value]) => `${key}=${value}`)
    .concat(`salt=${apiKey}`)
    .join("|");
  return createHash("sha256").update(data).digest("hex");
}

export type CreemProductInput = {
  id: string;
  /** cents */
  price: number;
  currency?: string;
  name?: string;
  description?: string;
  billing_type?: "onetime" | "recurring";
  billing_period?: string;
  default_success_url?: string | null;
};

export type CreemProduct = {
  id: string;
  mode: "test";
  object: "product";
  name: string;
  description: string;
  image_url: string | null;
  features: unknown[];
  price: number;
  currency: string;
  billing_type: string;
  billing_period: string;
  status: "active";
  tax_mode: "inclusive" | "exclusive";
  tax_category: string;
  product_url: string;
  default_success_url: string | null;
  created_at: string;
  updated_at: string;
};

export type CreemCheckout = {
  id: string;
  mode: "test";
  object: "checkout";
  status: "pending" | "processing" | "completed" | "expired";
  /** product id (create answer) — GET answers and webhooks carry the expanded product object */
  product: string;
  units: number;
  request_id?: string;
  success_url?: string;
  checkout_url: string;
  metadata?: Record<string, unknown>;
  customer?: { id?: string; email?: string };
  order?: Record<string, unknown>;
  customerObject?: Record<string, unknown>;
};

export type CreemEvent = {
  id: string;
  eventType: string;
  created_at: number;
  object: Record<string, unknown>;
};

export type CreemStubOptions = {
  /** the API key required in `x-api-key` (default "creem_test_stub_api_key") */
  apiKey?: string;
  products?: CreemProductInput[];
  webhookUrl?: string;
  webhookSecret?: string;
  seed?: string;
};

class CreemApiError extends Error {
  status: number;
  messages: string[] | undefined;
  constructor(status: number, messages?: string[]) {
    super(messages?.join("; ") ?? String(status));
    this.status = status;
    this.messages = messages;
  }
}

const REASON: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
};

export type CreemStub = Awaited<ReturnType<typeof startCreemStub>>;

export async function startCreemStub(opts: CreemStubOptions = {}) {
  const apiKey = opts.apiKey ?? "creem_test_stub_api_key";
  const nextId = idFactory(opts.seed ?? defaultSeed("creem"));
  let webhookUrl = opts.webhookUrl;
  let webhookSecret = opts.webhookSecret ?? "whsec_creem_stub_secret";
  const products = new Map<string, CreemProduct>();
  const checkouts = new Map<string, CreemCheckout>();
  const events: CreemEvent[] = [];
  const failures: number[] = [];
  const deliveries: { event: CreemEvent; url: string; status: number; body: string }[] = [];
  let origin = "";
  // Subscriptions of recurring products: creem-billing.ts.
  const billing = creemBilling({
    nextId: (p, l) => nextId(p, l),
    event(eventType, object) {
      const event: CreemEvent = { id: nextId("evt_", 22), eventType, created_at: Date.now(), object };
      events.push(event);
      return event as unknown as Record<string, unknown>;
    },
    checkout: (id) => checkouts.get(id) as never,
    product: (id) => products.get(id) as never,
  });

  function addProduct(input: CreemProductInput): CreemProduct {
    const stamp = new Date().toISOString();
    const product: CreemProduct = {
      id: input.id,
      mode: "test",
      object: "product",
      name: input.name ?? `Product ${input.id}`,
      description: input.description ?? "",
      image_url: null,
      features: [],
      price: input.price,
      currency: (input.currency ?? "USD").toUpperCase(),
      billing_type: input.billing_type ?? "onetime",
      billing_period: input.billing_period ?? (input.billing_type === "recurring" ? "every-month" : "once"),
      status: "active",
      tax_mode: "inclusive",
      tax_category: "saas",
      product_url: `${origin}/test/product/${input.id}`,
      default_success_url: input.default_success_url ?? null,
      created_at: stamp,
      updated_at: stamp,
    };
    products.set(product.id, product);
    return product;
  }

  function authenticate(req: RecordedRequest): void {
    const key = req.headers["x-api-key"];
    if (key === undefined || key === "" || !safeEqual(key, apiKey)) throw new CreemApiError(403);
  }

  function createCheckout(req: RecordedRequest): CreemCheckout {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(req.body || "null") as Record<string, unknown>;
    } catch {
      throw new CreemApiError(400, ["Unexpected token in JSON body"]);
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) throw new CreemApiError(400, ["product_id should not be empty", "product_id must be a string"]);
    const errors: string[] = [];
    const productId = body["product_id"];
    if (typeof productId !== "string" || productId === "") errors.push("product_id should not be empty", "product_id must be a string");
    const units = body["units"] ?? 1;
    if (typeof units !== "number" || !Number.isInteger(units) || units < 1) errors.push("units must be a positive number");
    const successUrl = body["success_url"];
    if (successUrl !== undefined && (typeof successUrl !== "string" || !URL.canParse(successUrl))) errors.push("success_url must be a URL address");
    const requestId = body["request_id"];
    if (requestId !== undefined && typeof requestId !== "string") errors.push("request_id must be a string");
    const metadata = body["metadata"];
    if (metadata !== undefined && (typeof metadata !== "object" || metadata === null || Array.isArray(metadata))) errors.push("metadata must be an object");
    const customer = body["customer"];
    if (customer !== undefined && (typeof customer !== "object" || customer === null)) errors.push("customer must be an object");
    if (errors.length > 0) throw new CreemApiError(400, errors);
    const product = products.get(productId as string);
    if (!product) throw new CreemApiError(404, ["Product not found"]);
    const id = nextId("ch_", 22);
    const checkout: CreemCheckout = {
      id,
      mode: "test",
      object: "checkout",
      status: "pending",
      product: product.id,
      units: units as number,
      checkout_url: `${origin}/test/checkout/${id}`,
    };
    if (requestId !== undefined) checkout.request_id = requestId as string;
    if (successUrl !== undefined) checkout.success_url = successUrl as string;
    if (metadata !== undefined) checkout.metadata = metadata as Record<string, unknown>;
    if (customer !== undefined) checkout.customer = customer as { id?: string; email?: string };
    checkouts.set(id, checkout);
    return checkout;
  }

  /** The checkout as GET /v1/checkouts and webhooks show it: product, order and customer expanded. */
  function expanded(checkout: CreemCheckout): Record<string, unknown> {
    const { customerObject, customer: _prefill, ...rest } = checkout;
    const out: Record<string, unknown> = { ...rest, product: products.get(checkout.product) ?? checkout.product };
    if (customerObject) out["customer"] = customerObject;
    out["custom_fields"] = [];
    return out;
  }

  /** `discount`: minor units off the price (a discount code): the order's amount_paid drops by it. */
  function complete(id: string, buyer: { email?: string; name?: string; country?: string } = {}, opts: { discount?: number } = {}): CreemEvent {
    const checkout = checkouts.get(id);
    if (!checkout) throw new Error(`creem stub: no checkout ${id}`);
    if (checkout.status !== "pending") throw new Error(`creem stub: checkout ${id} is ${checkout.status}, not pending`);
    const product = products.get(checkout.product)!;
    const stamp = new Date().toISOString();
    const customerId = checkout.customer?.id ?? nextId("cust_", 22);
    const customer = {
      id: customerId,
      object: "customer",
      email: buyer.email ?? checkout.customer?.email ?? "buyer@example.com",
      name: buyer.name ?? "Test Buyer",
      country: buyer.country ?? "NL",
      created_at: stamp,
      updated_at: stamp,
      mode: "test",
    };
    const amount = product.price * checkout.units;
    const discount = Math.min(opts.discount ?? 0, amount);
    const order = {
      id: nextId("ord_", 22),
      customer: customerId,
      product: product.id,
      amount,
      currency: product.currency,
      sub_total: amount,
      tax_amount: 0,
      discount_amount: discount,
      amount_due: amount - discount,
      amount_paid: amount - discount,
      status: "paid",
      type: product.billing_type === "recurring" ? "recurring" : "onetime",
      transaction: nextId("tran_", 22),
      created_at: stamp,
      updated_at: stamp,
      mode: "test",
      object: "order",
    };
    checkout.status = "completed";
    checkout.order = order;
    checkout.customerObject = customer;
    const event: CreemEvent = { id: nextId("evt_", 22), eventType: "checkout.completed", created_at: Date.now(), object: structuredClone(expanded(checkout)) };
    events.push(event);
    return event;
  }

  /**
   * A refund of a completed checkout's order (Creem's refund.created event: a refund object with
   * refund_amount / refund_currency, the transaction, the checkout and the order it reverses).
   */
  function refund(id: string, amount?: number): CreemEvent {
    const checkout = checkouts.get(id);
    if (!checkout || checkout.status !== "completed" || !checkout.order) throw new Error(`creem stub: checkout ${id} is not completed`);
    const order = checkout.order;
    const paid = order["amount_paid"] as number;
    const refundAmount = amount ?? paid;
    const stamp = Date.now();
    const refundObject = {
      id: nextId("ref_", 22),
      object: "refund",
      status: "succeeded",
      refund_amount: refundAmount,
      refund_currency: order["currency"],
      reason: "requested_by_customer",
      transaction: { id: order["transaction"], object: "transaction", amount: order["amount"], amount_paid: paid, currency: order["currency"], status: refundAmount >= paid ? "refunded" : "partially_refunded", order: order["id"], mode: "test" },
      checkout: { id: checkout.id, object: "checkout", request_id: checkout.request_id, metadata: checkout.metadata, status: checkout.status, mode: "test" },
      order: { ...order },
      customer: checkout.customerObject,
      created_at: stamp,
      mode: "test",
    };
    const event: CreemEvent = { id: nextId("evt_", 22), eventType: "refund.created", created_at: stamp, object: refundObject };
    events.push(event);
    return event;
  }

  function successRedirect(checkout: CreemCheckout): string {
    const product = products.get(checkout.product)!;
    const base = checkout.success_url ?? product.default_success_url ?? `${origin}/test/success`;
    const params: Record<string, string | undefined> = {
      request_id: checkout.request_id,
      checkout_id: checkout.id,
      order_id: checkout.order?.["id"] as string | undefined,
      customer_id: checkout.customerObject?.["id"] as string | undefined,
      product_id: checkout.product,
    };
    const url = new URL(base);
    for (const [k, v] of Object.entries(params)) if (v) url.searchParams.set(k, v);
    url.searchParams.set("signature", signCreemRedirect(params, apiKey));
    return url.toString();
  }

  async function deliverWebhook(
    event: CreemEvent,
    options: { url?: string; secret?: string; signature?: string } = {},
  ): Promise<{ status: number; body: string }> {
    const url = options.url ?? webhookUrl;
    if (!url) throw new Error("creem stub: no webhook URL (pass { url } or setWebhook)");
    const payload = JSON.stringify(event);
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "creem-signature": options.signature ?? signCreemPayload(payload, options.secret ?? webhookSecret) },
      body: payload,
    });
    const body = await res.text();
    deliveries.push({ event, url, status: res.status, body });
    return { status: res.status, body };
  }

  function hostedPage(req: RecordedRequest, id: string): StubResponse | Promise<StubResponse> {
    const checkout = checkouts.get(id);
    if (!checkout) return html(404, "<h1>Checkout not found</h1>");
    const action = req.query["action"] ?? (req.method === "POST" ? "pay" : undefined);
    if (action === "pay") {
      if (checkout.status !== "pending") return html(410, "<h1>This checkout is no longer available</h1>");
      const event = complete(id);
      const finish = (): StubResponse => ({ status: 303, headers: { location: successRedirect(checkout) }, body: "" });
      return webhookUrl ? deliverWebhook(event).then(finish, finish) : finish();
    }
    const product = products.get(checkout.product)!;
    return html(
      200,
      `<!doctype html><title>Creem checkout (stub)</title><h1>${escapeHtml(product.name)}: ${((product.price * checkout.units) / 100).toFixed(2)} ${escapeHtml(product.currency)}</h1>` +
        `<p id="status">${escapeHtml(checkout.status)}</p><form method="post" action="/test/checkout/${escapeHtml(id)}"><button id="pay" type="submit">Pay</button></form>`,
    );
  }

  async function route(req: RecordedRequest): Promise<StubResponse> {
    const page = /^\/test\/checkout\/([^/]+)$/.exec(req.path);
    if (page) return hostedPage(req, decodeURIComponent(page[1]!));
    authenticate(req);
    const failure = failures.shift();
    if (failure !== undefined) throw new CreemApiError(failure, ["Injected failure"]);
    if (req.path === "/v1/checkouts") {
      if (req.method === "POST") return json(200, createCheckout(req));
      if (req.method === "GET") {
        const id = req.query["checkout_id"];
        if (!id) throw new CreemApiError(400, ["checkout_id should not be empty"]);
        const checkout = checkouts.get(id);
        if (!checkout) throw new CreemApiError(404, ["Checkout not found"]);
        return json(200, expanded(checkout));
      }
      throw new CreemApiError(405);
    }
    if (req.path === "/v1/products" && req.method === "GET") {
      const id = req.query["product_id"];
      if (!id) throw new CreemApiError(400, ["product_id should not be empty"]);
      const product = products.get(id);
      if (!product) throw new CreemApiError(404, ["Product not found"]);
      return json(200, product);
    }
    throw new CreemApiError(404, [`Cannot ${req.method} ${req.path}`]);
  }

  const http = await startHttpStub(async (req) => {
    try {
      return await route(req);
    } catch (error) {
      if (!(error instanceof CreemApiError)) throw error;
      const body: Record<string, unknown> = {
        trace_id: createHash("sha256").update(`${req.at}:${http.requests.length}`).digest("hex").replace(/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/, "$1-$2-$3-$4-$5"),
        status: error.status,
        error: REASON[error.status] ?? "Error",
      };
      if (error.messages) body["message"] = error.messages;
      body["timestamp"] = Date.now();
      return json(error.status, body);
    }
  });
  origin = http.origin;
  for (const p of opts.products ?? []) addProduct(p);

  return {
    origin,
    /** what to configure instead of https://api.creem.io */
    baseUrl: origin,
    apiKey,
    get webhookSecret() {
      return webhookSecret;
    },
    get webhookUrl() {
      return webhookUrl;
    },
    requests: http.requests,
    products,
    checkouts,
    events,
    deliveries,
    addProduct,
    /** GET-style view of a checkout (expanded) */
    getCheckout(id: string): Record<string, unknown> | undefined {
      const c = checkouts.get(id);
      return c ? expanded(c) : undefined;
    },
    /** marks the checkout completed with a paid order and returns the checkout.completed event (not delivered) */
    completeCheckout: complete,
    /** POSTs the event as Creem does (compact JSON body, creem-signature header) */
    deliverWebhook,
    /** refunds a completed checkout (all of it unless `amount`) and returns the refund.created event (not delivered) */
    refundCheckout: refund,
    /** subscriptions of recurring products and their events (not delivered) */
    billing,
    /** completeCheckout + deliverWebhook to the configured URL */
    async pay(id: string, buyer?: { email?: string; name?: string }) {
      const event = complete(id, buyer);
      const delivery = await deliverWebhook(event);
      return { event, ...delivery };
    },
    /** the success_url redirect (with signed query) the buyer's browser would follow after paying */
    successRedirectUrl(id: string): string {
      const c = checkouts.get(id);
      if (!c) throw new Error(`creem stub: no checkout ${id}`);
      return successRedirect(c);
    },
    setWebhook(url: string | undefined, secret?: string) {
      webhookUrl = url;
      if (secret !== undefined) webhookSecret = secret;
    },
    /** the next `times` API calls answer `status` (default 500) in Creem's error shape */
    failNext(status = 500, times = 1) {
      for (let i = 0; i < times; i++) failures.push(status);
    },
    close: http.close,
  };
}
