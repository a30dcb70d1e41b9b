// Stripe Billing for the Stripe stub: recurring prices, Checkout in subscription mode creating
// a customer and a subscription with its first invoice, later periods' invoices, failed
// payments, updates (a plan change, cancel at period end), deletion, refunds of an invoice's
// charge, and the customer portal. Objects follow Stripe's API (2025+ shapes, with the older
// `invoice.subscription` and `charge.invoice` fields kept beside them).
import { json, type RecordedRequest, type StubResponse } from "./http.ts";

type Obj = Record<string, unknown>;

export interface BillingContext {
  nextId: (prefix: string, length?: number) => string;
  now: () => number;
  /** Records an event of `object` (as makeEvent does) and returns it. */
  event: (type: string, object: Obj, previous?: Obj) => Obj;
  parse: (body: string) => Obj;
  origin: () => string;
  prices: Map<string, { id: string; unit_amount: number; currency: string; product?: string; nickname?: string; recurring?: { interval: string } }>;
}

export function stripeBilling(ctx: BillingContext) {
  const subscriptions = new Map<string, Obj>();
  const invoices = new Map<string, Obj>();
  const charges = new Map<string, Obj>(); // by invoice id
  /** subscription_data of a subscription-mode session, by session id. */
  const sessionData = new Map<string, { metadata: Record<string, string>; price: string }>();
  const portals: Obj[] = [];
  /** Events the API's own changes made (POST /v1/subscriptions/:id), for the test to deliver. */
  const outbox: Obj[] = [];

  const addMonths = (t: number, n: number) => {
    const d = new Date(t * 1000);
    d.setUTCMonth(d.getUTCMonth() + n);
    return Math.floor(d.getTime() / 1000);
  };
  const intervalMonths = (priceId: string) => (ctx.prices.get(priceId)?.recurring?.interval === "year" ? 12 : 1);

  function invoice(sub: Obj, reason: string, start: number, end: number, paid: boolean): Obj {
    const item = (sub["items"] as { data: Obj[] }).data[0]!;
    const price = item["price"] as Obj;
    const id = ctx.nextId("in_1", 23);
    const inv: Obj = {
      id,
      object: "invoice",
      customer: sub["customer"],
      subscription: sub["id"],
      parent: { type: "subscription_details", subscription_details: { subscription: sub["id"], metadata: sub["metadata"] } },
      billing_reason: reason,
      currency: price["currency"],
      amount_due: price["unit_amount"],
      amount_paid: paid ? price["unit_amount"] : 0,
      amount_remaining: paid ? 0 : price["unit_amount"],
      attempt_count: 1,
      status: paid ? "paid" : "open",
      period_start: start,
      period_end: end,
      lines: { object: "list", data: [{ id: ctx.nextId("il_1", 23), object: "line_item", amount: price["unit_amount"], period: { start, end }, pricing: { price_details: { price: price["id"] } }, price }] },
      created: ctx.now(),
      livemode: false,
    };
    invoices.set(id, inv);
    return inv;
  }

  function onSessionCreate(session: Obj, p: Obj): void {
    if (session["mode"] !== "subscription") return;
    const items = p["line_items"] as Obj[];
    const sd = (p["subscription_data"] as Obj | undefined) ?? {};
    sessionData.set(session["id"] as string, { metadata: (sd["metadata"] as Record<string, string>) ?? {}, price: items[0]!["price"] as string });
  }

  /** A subscription-mode session paid: customer, subscription, first invoice (paid). Returns the events in Stripe's order. */
  function completeSubscription(session: Obj): Obj[] {
    const data = sessionData.get(session["id"] as string);
    if (!data) throw new Error("stripe stub: not a subscription session");
    const price = ctx.prices.get(data.price)!;
    const customer = (session["customer"] as string | null) ?? ctx.nextId("cus_", 14);
    const start = ctx.now();
    const end = addMonths(start, intervalMonths(price.id));
    const sub: Obj = {
      id: ctx.nextId("sub_1", 23),
      object: "subscription",
      customer,
      status: "active",
      cancel_at_period_end: false,
      canceled_at: null,
      ended_at: null,
      metadata: data.metadata,
      items: { object: "list", data: [{ id: ctx.nextId("si_", 14), object: "subscription_item", price: { ...price, object: "price", type: "recurring" }, quantity: 1, current_period_start: start, current_period_end: end }] },
      current_period_start: start,
      current_period_end: end,
      latest_invoice: null,
      livemode: false,
    };
    subscriptions.set(sub["id"] as string, sub);
    const inv = invoice(sub, "subscription_create", start, end, true);
    sub["latest_invoice"] = inv["id"];
    session["customer"] = customer;
    session["subscription"] = sub["id"];
    session["invoice"] = inv["id"];
    return [ctx.event("customer.subscription.created", structuredClone(sub)), ctx.event("invoice.paid", structuredClone(inv))];
  }

  function chargeOfInvoice(invoiceId: string): Obj {
    const inv = invoices.get(invoiceId)!;
    let c = charges.get(invoiceId);
    if (!c) {
      c = { id: ctx.nextId("ch_3", 21), object: "charge", amount: inv["amount_paid"], amount_captured: inv["amount_paid"], amount_refunded: 0, currency: inv["currency"], customer: inv["customer"], invoice: invoiceId, payment_intent: ctx.nextId("pi_3", 21), refunded: false, paid: true, status: "succeeded" };
      charges.set(invoiceId, c);
    }
    return c;
  }

  const get = (id: string) => {
    const s = subscriptions.get(id);
    if (!s) throw new Error(`stripe stub: no subscription ${id}`);
    return s;
  };
  const setPeriod = (sub: Obj, start: number, end: number) => {
    sub["current_period_start"] = start;
    sub["current_period_end"] = end;
    const item = (sub["items"] as { data: Obj[] }).data[0]!;
    item["current_period_start"] = start;
    item["current_period_end"] = end;
  };

  const api = {
    subscriptions,
    invoices,
    portals,
    outbox,
    /** Takes the events the API's changes made so far. */
    drain: () => outbox.splice(0),
    onSessionCreate,
    completeSubscription,
    /** The next period: its invoice paid (`fail`: its payment failed; the subscription goes past_due). */
    renew(id: string, opts: { fail?: boolean } = {}): Obj[] {
      const sub = get(id);
      const start = sub["current_period_end"] as number;
      const price = ((sub["items"] as { data: Obj[] }).data[0]!["price"] as Obj)["id"] as string;
      const end = addMonths(start, intervalMonths(price));
      const inv = invoice(sub, "subscription_cycle", start, end, !opts.fail);
      sub["latest_invoice"] = inv["id"];
      setPeriod(sub, start, end);
      if (opts.fail) {
        const prev = { status: sub["status"] };
        sub["status"] = "past_due";
        return [ctx.event("invoice.payment_failed", structuredClone(inv)), ctx.event("customer.subscription.updated", structuredClone(sub), prev)];
      }
      return [ctx.event("invoice.paid", structuredClone(inv))];
    },
    /** A later retry of the latest (failed) invoice succeeds. */
    payLatest(id: string): Obj[] {
      const sub = get(id);
      const inv = invoices.get(sub["latest_invoice"] as string)!;
      inv["status"] = "paid";
      inv["amount_paid"] = inv["amount_due"];
      inv["amount_remaining"] = 0;
      inv["attempt_count"] = (inv["attempt_count"] as number) + 1;
      const prev = { status: sub["status"] };
      sub["status"] = "active";
      return [ctx.event("invoice.paid", structuredClone(inv)), ctx.event("customer.subscription.updated", structuredClone(sub), prev)];
    },
    /** cancel_at_period_end and/or a new price (a plan change; the proration invoice paid at once). */
    update(id: string, u: { cancelAtPeriodEnd?: boolean; price?: string }): Obj[] {
      const sub = get(id);
      const prev: Obj = {};
      const out: Obj[] = [];
      if (u.cancelAtPeriodEnd !== undefined) {
        prev["cancel_at_period_end"] = sub["cancel_at_period_end"];
        sub["cancel_at_period_end"] = u.cancelAtPeriodEnd;
      }
      if (u.price) {
        const item = (sub["items"] as { data: Obj[] }).data[0]!;
        prev["items"] = structuredClone(sub["items"]);
        item["price"] = { ...ctx.prices.get(u.price)!, object: "price", type: "recurring" };
      }
      out.push(ctx.event("customer.subscription.updated", structuredClone(sub), prev));
      if (u.price) out.push(ctx.event("invoice.paid", structuredClone(invoice(sub, "subscription_update", ctx.now(), sub["current_period_end"] as number, true))));
      return out;
    },
    delete(id: string): Obj[] {
      const sub = get(id);
      sub["status"] = "canceled";
      sub["ended_at"] = ctx.now();
      sub["canceled_at"] = ctx.now();
      return [ctx.event("customer.subscription.deleted", structuredClone(sub))];
    },
    /** Refunds an invoice's charge in full: charge.refunded with the Charge (invoice set). */
    refundInvoice(invoiceId: string): Obj[] {
      const c = chargeOfInvoice(invoiceId);
      const prev = { amount_refunded: c["amount_refunded"], refunded: c["refunded"] };
      c["amount_refunded"] = c["amount_captured"];
      c["refunded"] = true;
      return [ctx.event("charge.refunded", structuredClone(c), prev)];
    },
    /** A dispute of an invoice's charge: charge.dispute.created with the Dispute (it names the charge only). */
    disputeInvoice(invoiceId: string): Obj[] {
      const c = chargeOfInvoice(invoiceId);
      const d = { id: ctx.nextId("dp_1", 23), object: "dispute", amount: c["amount_captured"], charge: c["id"], currency: c["currency"], payment_intent: c["payment_intent"], reason: "fraudulent", status: "needs_response", created: ctx.now(), livemode: false };
      return [ctx.event("charge.dispute.created", d)];
    },
    handle(req: RecordedRequest): StubResponse | null {
      const { method, path } = req;
      const charge = /^\/v1\/charges\/([^/]+)$/.exec(path);
      if (charge && method === "GET") {
        const c = [...charges.values()].find((x) => x["id"] === decodeURIComponent(charge[1]!));
        return c ? json(200, c) : null;
      }
      if (path === "/v1/prices" && method === "POST") {
        const p = ctx.parse(req.body);
        const recurring = p["recurring"] as Obj | undefined;
        const productData = p["product_data"] as Obj | undefined;
        if (p["currency"] === undefined) return json(400, { error: { type: "invalid_request_error", message: "Missing required param: currency.", param: "currency" } });
        const price = {
          id: ctx.nextId("price_1", 23),
          unit_amount: Number(p["unit_amount"]),
          currency: String(p["currency"]).toLowerCase(),
          product: (p["product"] as string | undefined) ?? ctx.nextId("prod_", 14),
          nickname: (productData?.["name"] as string | undefined) ?? (p["nickname"] as string | undefined),
          ...(recurring ? { recurring: { interval: String(recurring["interval"]) } } : {}),
        };
        ctx.prices.set(price.id, price);
        return json(200, { ...price, object: "price", type: recurring ? "recurring" : "one_time", active: true, livemode: false });
      }
      if (path === "/v1/billing_portal/sessions" && method === "POST") {
        const p = ctx.parse(req.body);
        if (typeof p["customer"] !== "string") return json(400, { error: { type: "invalid_request_error", message: "Missing required param: customer.", param: "customer" } });
        const s = { id: ctx.nextId("bps_1", 23), object: "billing_portal.session", customer: p["customer"], return_url: p["return_url"] ?? null, url: `${ctx.origin()}/p/session/${ctx.nextId("test_", 20)}`, livemode: false };
        portals.push(s);
        return json(200, s);
      }
      const m = /^\/v1\/subscriptions\/([^/]+)$/.exec(path);
      if (m) {
        const sub = subscriptions.get(decodeURIComponent(m[1]!));
        if (!sub) return json(404, { error: { type: "invalid_request_error", message: `No such subscription: '${m[1]}'`, code: "resource_missing" } });
        if (method === "GET") return json(200, sub);
        if (method === "POST") {
          const p = ctx.parse(req.body);
          const items = p["items"] as Obj[] | undefined;
          const price = items?.[0]?.["price"] as string | undefined;
          if (price && !ctx.prices.has(price)) return json(400, { error: { type: "invalid_request_error", message: `No such price: '${price}'`, param: "items[0][price]", code: "resource_missing" } });
          outbox.push(...api.update(sub["id"] as string, { ...(p["cancel_at_period_end"] !== undefined ? { cancelAtPeriodEnd: p["cancel_at_period_end"] === "true" } : {}), ...(price ? { price } : {}) }));
          return json(200, sub);
        }
      }
      return null;
    },
  };
  return api;
}
