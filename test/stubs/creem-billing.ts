// Creem subscriptions for the Creem stub: a completed checkout of a recurring product starts a
// subscription (subscription.active, subscription.paid), later periods are paid
// (subscription.paid) or fail (subscription.past_due), a cancellation is scheduled
// (subscription.scheduled_cancel) or immediate (subscription.canceled), a subscription may
// expire (subscription.expired), and a period's transaction may be refunded (refund.created).
// Event names and object fields as Creem's docs give them (docs.creem.io, Webhooks → Event Types).
type Obj = Record<string, unknown>;

export interface CreemBillingContext {
  nextId: (prefix: string, length?: number) => string;
  /** Records an event and returns it. */
  event: (eventType: string, object: Obj) => Obj;
  checkout: (id: string) => (Obj & { product: string; metadata?: Record<string, unknown>; customerObject?: Obj; order?: Obj }) | undefined;
  product: (id: string) => (Obj & { billing_period?: string }) | undefined;
}

export function creemBilling(ctx: CreemBillingContext) {
  const subscriptions = new Map<string, Obj>();
  const iso = (ms: number) => new Date(ms).toISOString();
  const addMonths = (ms: number, n: number) => {
    const d = new Date(ms);
    d.setUTCMonth(d.getUTCMonth() + n);
    return d.getTime();
  };
  const months = (productId: string) => (ctx.product(productId)?.billing_period === "every-year" ? 12 : 1);

  function transaction(sub: Obj): string {
    const id = ctx.nextId("tran_", 22);
    sub["last_transaction_id"] = id;
    return id;
  }
  const view = (sub: Obj) => ({ ...structuredClone(sub), product: ctx.product(sub["product"] as string) ?? sub["product"] });
  const get = (id: string) => {
    const s = subscriptions.get(id);
    if (!s) throw new Error(`creem stub: no subscription ${id}`);
    return s;
  };

  return {
    subscriptions,
    /** After completeCheckout of a recurring product: the subscription and its first paid period. */
    start(checkoutId: string): Obj[] {
      const c = ctx.checkout(checkoutId);
      if (!c || !c.order) throw new Error(`creem stub: checkout ${checkoutId} is not completed`);
      const now = Date.now();
      const sub: Obj = {
        id: ctx.nextId("sub_", 22),
        object: "subscription",
        product: c.product,
        customer: c.customerObject ?? { id: c.order["customer"] },
        collection_method: "charge_automatically",
        status: "active",
        current_period_start_date: iso(now),
        current_period_end_date: iso(addMonths(now, months(c.product))),
        canceled_at: null,
        metadata: c.metadata ?? {},
        mode: "test",
        created_at: iso(now),
        updated_at: iso(now),
      };
      transaction(sub);
      subscriptions.set(sub["id"] as string, sub);
      c["subscription"] = { id: sub["id"], object: "subscription" };
      return [ctx.event("subscription.active", view(sub)), ctx.event("subscription.paid", view(sub))];
    },
    /** The next period: paid (subscription.paid), or its payment failed (subscription.past_due). */
    renew(id: string, opts: { fail?: boolean } = {}): Obj[] {
      const sub = get(id);
      const start = Date.parse(sub["current_period_end_date"] as string);
      sub["current_period_start_date"] = iso(start);
      sub["current_period_end_date"] = iso(addMonths(start, months(sub["product"] as string)));
      if (opts.fail) {
        sub["status"] = "past_due";
        return [ctx.event("subscription.past_due", view(sub))];
      }
      sub["status"] = "active";
      transaction(sub);
      return [ctx.event("subscription.paid", view(sub))];
    },
    /** A retry of the failed period's payment succeeds. */
    recover(id: string): Obj[] {
      const sub = get(id);
      sub["status"] = "active";
      transaction(sub);
      return [ctx.event("subscription.paid", view(sub))];
    },
    scheduleCancel(id: string): Obj[] {
      const sub = get(id);
      sub["status"] = "scheduled_cancel";
      return [ctx.event("subscription.scheduled_cancel", view(sub))];
    },
    cancel(id: string): Obj[] {
      const sub = get(id);
      sub["status"] = "canceled";
      sub["canceled_at"] = iso(Date.now());
      return [ctx.event("subscription.canceled", view(sub))];
    },
    expire(id: string): Obj[] {
      const sub = get(id);
      sub["status"] = "expired";
      return [ctx.event("subscription.expired", view(sub))];
    },
    /** Refunds the subscription's last transaction: refund.created. */
    refundLast(id: string): Obj[] {
      const sub = get(id);
      const refund = {
        id: ctx.nextId("ref_", 22),
        object: "refund",
        status: "succeeded",
        refund_amount: (ctx.product(sub["product"] as string)?.["price"] as number) ?? 0,
        refund_currency: (ctx.product(sub["product"] as string)?.["currency"] as string) ?? "USD",
        reason: "requested_by_customer",
        transaction: { id: sub["last_transaction_id"], object: "transaction" },
        subscription: view(sub),
        customer: sub["customer"],
        created_at: Date.now(),
        mode: "test",
      };
      return [ctx.event("refund.created", refund)];
    },
  };
}
