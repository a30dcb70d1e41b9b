// Money and metering around every AI call. One AiCall per call:
//   reserve(worst case)  — before the upstream call, when a billing capability exists and the
//                          caller is a user: the worst-case cost is held (402 when short);
//   finish(status, used) — exactly once: settles the hold to the measured cost (or releases it
//                          when the call failed before anything was consumed) and hands one
//                          MeterRecord to the metering capability. Failed calls are recorded too.
import { enterCall, leaveCall } from './concurrency.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import type { Identity } from '../../kernel/identity.ts';
import type { RequestTiming } from '../../kernel/service.ts';
import {
  BILLING,
  METERING,
  NOTHING_MEASURED,
  costOf,
  worstCostOf,
  type Billing,
  type Hold,
  type Measured,
  type MeterRecord,
  type MeteringSink,
  type Prices,
} from '../../kernel/metering.ts';
import { metrics } from '../../kernel/metrics.ts';
import { GatewayError } from '../../kernel/errors.ts';
import type { KeyLimits } from '../../kernel/identity.ts';
import { WINDOWS, type RollingWindows, type WindowHold } from '../../kernel/windows.ts';
import { pricesOf } from './catalog/prices.ts';
import { cityPrices } from './catalog/city-prices.ts';
import type { Mode, ModelDef } from './catalog/registry.ts';
import type { CitySettings } from '../../kernel/city-settings.ts';

export type CallStatus = MeterRecord['status'];

/** A call's mode (its usage record's): a catalog mode, or `gemini` — a call through Google's Gemini API, which any model with `compat` takes (gemini/index.ts). */
export type CallMode = Mode | 'gemini';

export function measured(m: Partial<Measured>): Measured {
  // written out, not spread: this runs on every call
  return {
    input_tokens: m.input_tokens ?? 0,
    output_tokens: m.output_tokens ?? 0,
    cached_tokens: m.cached_tokens ?? 0,
    cache_write_tokens: m.cache_write_tokens ?? 0,
    cache_write_1h_tokens: m.cache_write_1h_tokens ?? 0,
    images: m.images ?? 0,
    seconds: m.seconds ?? 0,
  };
}

const isNothing = (m: Measured) => !m.input_tokens && !m.output_tokens && !m.cached_tokens && !m.cache_write_tokens && !m.images && !m.seconds;

const utf8 = new TextEncoder();
/** An upper bound of the tokens of a text: no tokenizer yields more tokens than UTF-8 bytes. */
export function tokenBound(text: string): number {
  // String length ≤ UTF-8 bytes ≤ 3 × length (UTF-16 units); encoding is exact but costs a copy.
  return text.length < 4096 ? utf8.encode(text).byteLength : text.length * 3;
}

// ---- estimates -------------------------------------------------------------------------
// When the upstream reports no usage (an abort before its usage event, or an upstream that
// never reports it), the call is charged this estimate and its usage record says `estimated`
// (docs/money.md, "Estimates"):
//   input  ≈ the request body's UTF-8 bytes / 4;
//   output ≈ the returned text's UTF-8 bytes / 4, or — for a relayed event stream, whose
//            events are not decoded — one token per JSON event after the first (role) event.
export const BYTES_PER_TOKEN = 4;

export type Usage = Partial<Measured> & { estimated?: boolean };

export const byteLength = (text: string) => utf8.encode(text).byteLength;

export function estimateFromText(requestBytes: number, outputBytes: number): Usage {
  return { input_tokens: Math.ceil(requestBytes / BYTES_PER_TOKEN), output_tokens: Math.ceil(outputBytes / BYTES_PER_TOKEN), estimated: true };
}

export function estimateFromEvents(requestBytes: number, jsonEvents: number): Usage {
  return { input_tokens: Math.ceil(requestBytes / BYTES_PER_TOKEN), output_tokens: Math.max(0, jsonEvents - 1), estimated: true };
}

export interface CallState {
  requestId: string;
  identity: Identity;
  modelId: string;
  mode: CallMode;
  startedAt: number;
  hold: Hold | null;
  /** Set by routing: the upstream of the last attempt and how many attempts were made. */
  upstream?: string;
  attempts?: number;
  /** The request's timing (absent for background jobs): the record's overhead_ms. */
  timing?: RequestTiming;
  /** The alias the caller named (the record's alias; modelId is the model it names). */
  alias?: string;
}

/** What a call is made on: resolveModel's answer (the model, the alias asked for, the caller's city). */
export interface CallModel {
  model: ModelDef;
  alias?: string;
  city?: CitySettings;
}

export class AiCall {
  readonly gw: GatewayContext;
  readonly state: CallState;
  /** The caller's city's prices (what is held and charged). */
  readonly prices: Prices | null;
  /** The base prices (the usage record's base_credits: the city's margin is the difference). */
  readonly basePrices: Prices | null;
  /** What the usage record should say about the call (e.g. hosted tools a translation left out). */
  note?: string;
  #finished = false;
  /** The credits held in the window of the caller's API key budget, when it has one. */
  #window: WindowHold | null = null;
  /** The user's key while counted against the default cap on calls in flight (concurrency.ts). */
  #counted: string | null = null;

  /** `fixed`: the prices a restored job was held at (else the model's now, at the city's prices). */
  constructor(gw: GatewayContext, state: CallState, model: ModelDef | null, city?: CitySettings, fixed?: { prices: Prices | null; basePrices: Prices | null }) {
    this.gw = gw;
    this.state = state;
    this.basePrices = fixed ? fixed.basePrices : model ? pricesOf(gw, model) : null;
    this.prices = fixed ? fixed.prices : model ? cityPrices(city, model.id, this.basePrices) : null;
  }

  static start(gw: GatewayContext, identity: Identity, on: CallModel, mode: CallMode, requestId: string, timing?: RequestTiming): AiCall {
    const state: CallState = { requestId, identity, modelId: on.model.id, mode, startedAt: Date.now(), hold: null, timing };
    if (on.alias !== undefined) state.alias = on.alias;
    return new AiCall(gw, state, on.model, on.city);
  }

  /** Routing's report (RouteObserver): the upstream being tried and the attempt number. */
  routed(upstream: string, attempts: number): void {
    this.state.upstream = upstream;
    this.state.attempts = attempts;
  }

  get hold(): Hold | null {
    return this.state.hold;
  }

  /** Holds the worst-case cost; throws the billing's 402 when the user is short. */
  async reserve(worst: Partial<Measured>, opts: { durable?: boolean } = {}): Promise<void> {
    const billing = this.gw.use<Billing>(BILLING);
    const id = this.state.identity;
    // background jobs (durable holds) end in whichever process runs them: not counted here
    if (id.kind === 'user' && !opts.durable && this.#counted === null) this.#counted = enterCall(this.gw, id.cityId, id.userId, this);
    if (!billing || id.kind !== 'user' || !this.prices) return;
    const credits = worstCostOf(this.prices, measured(worst));
    if (credits <= 0) return;
    try {
      // A user API key's budget (accounts/keys): its window must take the hold too.
      if (id.key?.budget) await this.#reserveKeyBudget(id.keyId!, id.key.budget, credits, opts.durable === true);
      this.state.hold = await billing.reserve({
        cityId: id.cityId,
        userId: id.userId,
        credits,
        requestId: this.state.requestId,
        model: this.state.modelId,
        mode: this.state.mode,
        ...(opts.durable ? { durable: true } : {}),
      });
    } catch (e) {
      if (this.#window) this.gw.use<RollingWindows>(WINDOWS)?.release(this.#window);
      this.#window = null;
      // Refused before any upstream call: still one record, with the refusal's code.
      this.#record('error', NOTHING_MEASURED, (e as { code?: string }).code ?? 'billing_failed', 0);
      this.#finished = true;
      this.#leave();
      throw e;
    }
  }

  /**
   * Holds `credits` in the key's budget window (402 key_budget_exceeded when they do not fit).
   * A durable hold (a job another process may finish) is counted at once at its full amount:
   * the window's hold lives in this process's memory.
   */
  async #reserveKeyBudget(keyId: string, budget: NonNullable<KeyLimits['budget']>, credits: number, durable: boolean): Promise<void> {
    const windows = this.gw.use<RollingWindows>(WINDOWS);
    if (!windows) return;
    const got = await windows.reserve(`key:${keyId}`, budget.windows, credits);
    if ('refused' in got) {
      const w = got.window;
      const span = w.seconds === null ? 'in total' : `in its ${w.name} window`;
      const when = w.resets_at === null ? '' : `; credits come back from ${new Date(w.resets_at).toISOString()}`;
      throw new GatewayError(402, 'key_budget_exceeded', `This call needs up to ${credits} credits but this API key has ${w.remaining} of its ${w.limit} credits left ${span}${when}.`, {
        headers: got.retryAfterMs === null ? undefined : { 'retry-after': String(Math.ceil(got.retryAfterMs / 1000)) },
      });
    }
    if (durable) windows.settle(got, credits);
    else this.#window = got;
  }

  /**
   * Ends the call. The charge is the cost of what was measured; a failed or aborted call that
   * consumed nothing measurable is not charged and its hold is released.
   */
  async finish(status: CallStatus, used: Usage = {}, errorCode?: string): Promise<void> {
    if (this.#finished) return;
    this.#finished = true;
    this.#leave();
    const m = measured(used);
    const estimated = used.estimated;
    const credits = status !== 'ok' && isNothing(m) ? 0 : costOf(this.prices, m);
    const hold = this.state.hold;
    const billing = this.gw.use<Billing>(BILLING);
    if (hold && billing) {
      try {
        if (credits === 0 && status !== 'ok') await billing.release(hold);
        else await billing.settle(hold, credits);
      } catch (e) {
        this.gw.log('error', 'ai: settling a credit hold failed', { request_id: this.state.requestId, hold: hold.id, error: String(e) });
      }
    }
    const window = this.#window;
    if (window) {
      this.#window = null;
      const windows = this.gw.use<RollingWindows>(WINDOWS);
      if (credits === 0 && status !== 'ok') windows?.release(window);
      else windows?.settle(window, credits);
    }
    const base = this.basePrices === this.prices ? credits : status !== 'ok' && isNothing(m) ? 0 : costOf(this.basePrices, m);
    this.#record(status, m, errorCode, credits, estimated === true && !isNothing(m), base);
  }

  #leave(): void {
    if (this.#counted !== null) leaveCall(this.gw, this.#counted, this);
    this.#counted = null;
  }

  #record(status: CallStatus, m: Measured, errorCode: string | undefined, credits: number, estimated = false, base = credits): void {
    const sink = this.gw.use<MeteringSink>(METERING);
    const id = this.state.identity;
    const st = this.state;
    const now = Date.now();
    // one literal, the optional fields added when set (spreads cost an object each per call)
    const r: MeterRecord = {
      input_tokens: m.input_tokens,
      output_tokens: m.output_tokens,
      cached_tokens: m.cached_tokens,
      cache_write_tokens: m.cache_write_tokens,
      cache_write_1h_tokens: m.cache_write_1h_tokens,
      images: m.images,
      seconds: m.seconds,
      request_id: st.requestId,
      city_id: id.kind === 'user' || id.kind === 'bureau' ? id.cityId : null,
      user_id: id.kind === 'user' ? id.userId : null,
      identity: id.kind,
      model: st.modelId,
      mode: st.mode,
      status,
      credits,
      base_credits: base,
      duration_ms: now - st.startedAt,
      overhead_ms: null,
      created_at: now,
    };
    if (errorCode) r.error_code = errorCode;
    if (this.note) r.note = this.note;
    if (st.alias !== undefined) r.alias = st.alias;
    if (id.kind === 'user' && id.keyId !== undefined) r.key_id = id.keyId;
    if (estimated) r.estimated = estimated;
    if (st.upstream !== undefined) {
      r.upstream = st.upstream;
      r.attempts = st.attempts;
    }
    if (st.hold?.lease) r.lease_owner = st.hold.lease;
    observeCall(r);
    st.timing?.trace?.usage({ inputTokens: m.input_tokens, outputTokens: m.output_tokens, credits, status });
    if (!sink) return;
    const write = () => {
      r.overhead_ms = overheadOf(st.timing);
      try {
        sink.record(r);
      } catch (e) {
        this.gw.log('error', 'ai: metering sink failed', { request_id: r.request_id, error: String(e) });
      }
    };
    // A call answered whole is recorded once its response is ready, with the overhead it reports.
    if (st.timing?.whenReady) st.timing.whenReady.push(write);
    else write();
  }
}

/** Tokens and credits of a call for /metrics (by city and model). */
function observeCall(r: MeterRecord): void {
  const m = metrics();
  const city = r.city_id ?? '';
  if (r.input_tokens) m.tokens.inc({ gen_ai_token_type: 'input', gen_ai_request_model: r.model, city }, r.input_tokens);
  if (r.output_tokens) m.tokens.inc({ gen_ai_token_type: 'output', gen_ai_request_model: r.model, city }, r.output_tokens);
  if (r.credits) m.credits.inc({ city, model: r.model }, r.credits);
}

/**
 * citygate's time in a call: what the kernel reported in x-citygate-overhead-ms when the
 * response is out already (a stream ends after it), else the time so far minus upstream waits.
 */
function overheadOf(t: RequestTiming | undefined): number | null {
  if (!t) return null;
  return t.overheadMs ?? Math.max(0, performance.now() - t.startedAt - t.upstreamMs);
}
