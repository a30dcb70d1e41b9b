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
  /** Prompt-cache writes, 5-minute cache (Anthropic: 1.25 × input); absent: the input price. */
  cache_write_per_mtok?: number;
  /** Prompt-cache writes, 1-hour cache (Anthropic: 2 × input); absent: the 5-minute write price. */
  cache_write_1h_per_mtok?: number;
  per_image?: number;
  per_second?: number;
  per_request?: number;
}

/**
 * What a call consumed. input_tokens counts every input token: cache reads (cached_tokens) and
 * cache writes (cache_write_tokens, of which cache_write_1h_tokens went to the 1-hour cache)
 * are parts of it, priced apart.
 */
export interface Measured {
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  cache_write_1h_tokens: number;
  images: number;
  seconds: number;
}

export const NOTHING_MEASURED: Measured = { input_tokens: 0, output_tokens: 0, cached_tokens: 0, cache_write_tokens: 0, cache_write_1h_tokens: 0, images: 0, seconds: 0 };

/**
 * The cost of measured usage in whole credits (rounded up: never undercharge a fraction):
 *   plain input × input + cache reads × cached + 5-minute writes × cache_write
 *   + 1-hour writes × cache_write_1h + output × output + images, seconds, per request;
 * plain input = input − reads − writes, never below 0 (an upstream whose parts exceed its
 * total is charged for the parts), so no term is ever negative.
 */
export function costOf(p: Prices | null | undefined, m: Measured): number {
  return p ? costAt(p, m, p.input_per_mtok ?? 0) : 0;
}

/**
 * The worst-case cost of a call for its credit hold: every plain input token at the dearest
 * input price there is (a 1-hour cache write costs 2 × input at Anthropic), so whatever the
 * upstream reports as written to or read from its cache, the hold covers it.
 */
export function worstCostOf(p: Prices | null | undefined, m: Measured): number {
  if (!p) return 0;
  const input = p.input_per_mtok ?? 0;
  const write5m = p.cache_write_per_mtok ?? input;
  return costAt(p, m, Math.max(input, p.cached_per_mtok ?? 0, write5m, p.cache_write_1h_per_mtok ?? write5m));
}

/** costOf with plain input tokens at `plainPrice` (the other prices fall back to the input price as costOf's do). */
function costAt(p: Prices, m: Measured, plainPrice: number): number {
  const input = p.input_per_mtok ?? 0;
  const writes = m.cache_write_tokens;
  const w1h = Math.min(m.cache_write_1h_tokens, writes);
  const plain = Math.max(0, m.input_tokens - m.cached_tokens - writes);
  const write5m = p.cache_write_per_mtok ?? input;
  const c =
    (plain * plainPrice +
      m.cached_tokens * (p.cached_per_mtok ?? input) +
      (writes - w1h) * write5m +
      w1h * (p.cache_write_1h_per_mtok ?? write5m) +
      m.output_tokens * (p.output_per_mtok ?? 0)) /
      1e6 +
    m.images * (p.per_image ?? 0) +
    m.seconds * (p.per_second ?? 0) +
    (p.per_request ?? 0);
  return Math.max(0, Math.ceil(c - 1e-9)); // max: never -0 for nothing used
}

/** One record per AI call, failed ones too. */
export interface MeterRecord extends Omit<Measured, 'cache_write_tokens' | 'cache_write_1h_tokens'> {
  /** Prompt-cache writes (part of input_tokens), and of them those to the 1-hour cache; absent: none. */
  cache_write_tokens?: number;
  cache_write_1h_tokens?: number;
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
  /** The cost at the base price (credits at the city's price − this = the city's margin); absent: credits. */
  base_credits?: number;
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
  /** A remark on the call, e.g. hosted tools a translated call left out. */
  note?: string;
  /** The alias the caller named; `model` is the model it names. */
  alias?: string;
  /** The user API key the call was made with (accounts/keys). */
  key_id?: string;
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
