// The contract between the services that spend (ai) and those that count (balance, usage).
// The kernel knows neither side: ai looks these capabilities up with gw.use(); balance and
// usage offer them with gw.provide() in their init(). Credits are integers: 1 USD = 1,000,000.

export const CREDITS_PER_USD = 1_000_000;
export const BILLING = 'billing';
export const METERING = 'metering';

/** Prices in credits. Absent fields cost nothing. */
export interface Prices {
  input_per_mtok?: number;
  output_per_mtok?: number;
  cached_per_mtok?: number;
  per_image?: number;
  per_second?: number;
  per_request?: number;
}

export interface Measured {
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  images: number;
  seconds: number;
}

export const NOTHING_MEASURED: Measured = { input_tokens: 0, output_tokens: 0, cached_tokens: 0, images: 0, seconds: 0 };

/** The cost of measured usage in whole credits (rounded up: never undercharge a fraction). */
export function costOf(p: Prices | null | undefined, m: Measured): number {
  if (!p) return 0;
  const uncached = Math.max(0, m.input_tokens - m.cached_tokens);
  const cachedPrice = p.cached_per_mtok ?? p.input_per_mtok ?? 0;
  const c =
    (uncached * (p.input_per_mtok ?? 0) + m.cached_tokens * cachedPrice + m.output_tokens * (p.output_per_mtok ?? 0)) / 1e6 +
    m.images * (p.per_image ?? 0) +
    m.seconds * (p.per_second ?? 0) +
    (p.per_request ?? 0);
  return Math.ceil(c - 1e-9);
}

/** One record per AI call, failed ones too. */
export interface MeterRecord extends Measured {
  request_id: string;
  city_id: string | null;
  user_id: string | null;
  identity: 'user' | 'admin' | 'bureau' | 'guest';
  model: string;
  mode: string;
  status: 'ok' | 'error' | 'aborted';
  error_code?: string;
  /** The upstream reported no usage: the measured fields are the documented estimate. */
  estimated?: boolean;
  credits: number;
  duration_ms: number;
  /** citygate's own time in the call (the x-citygate-overhead-ms of its response), when known. */
  overhead_ms?: number | null;
  created_at: number;
  /** The upstream that served the call (ai routing), when one was reached. */
  upstream?: string;
  /** Upstream attempts the call made (retries and fallbacks included). */
  attempts?: number;
  /** The process whose credit lease billed the call (Hold.lease). */
  lease_owner?: string;
}

/** A reservation of credits made before an upstream call. */
export interface Hold {
  id: string;
  cityId: string;
  userId: string;
  credits: number;
  /** Served from a credit lease of this process (its owner id), not a per-call hold. */
  lease?: string;
}

export interface Billing {
  /** Atomically reserves credits; throws a 402 insufficient_credits GatewayError when short. */
  /**
   * `durable`: the hold must outlive this process (a job, whose hold is saved with it and
   * settled by whichever process finishes it), so it cannot live in a process's memory.
   */
  reserve(a: { cityId: string; userId: string; credits: number; requestId: string; model: string; mode: string; durable?: boolean }): Promise<Hold>;
  /** Charges the measured cost and returns the rest of the hold, exactly once per hold. */
  settle(hold: Hold, credits: number): Promise<void>;
  /** Returns the whole hold (the upstream failed before anything was consumed). */
  release(hold: Hold): Promise<void>;
}

/** Receives meter records; must not add a database round trip to the request's path. */
export interface MeteringSink {
  record(r: MeterRecord): void;
}
