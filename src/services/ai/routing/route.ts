// Routing one AI call: "call this model, with retries and fallbacks". Every endpoint hands
// route() an attempt function that makes one upstream call against a Target and returns once
// the call is committed (a JSON answer read, or a stream's first byte in hand); route() picks
// the target, retries, keeps the circuit breakers and the metrics.
//
//   candidates: the enabled upstreams that serve the model (its env slot when its key is set,
//               and every ai_upstreams row naming it) and can serve this request (an
//               endpoint's `serves`, e.g. embeddings: those that embed), minus those cooling down;
//   order:      lowest priority first; within a priority, a weighted random pick; upstreams not
//               yet tried in this call before a second try of one;
//   retry:      after a connection error, a timeout before the first byte, a 429 or a 5xx (and
//               an upstream refusing its key: another upstream may hold a good one), up to
//               AI_MAX_ATTEMPTS attempts (default 3), with jittered exponential backoff
//               (AI_RETRY_BACKOFF_MS, default 100) or the upstream's Retry-After when the same
//               upstream is tried again (waited for up to AI_RETRY_AFTER_MAX_MS, default 10 s);
//   never:      after an input error (4xx), a client that went away, or once a stream's first
//               byte went to the client (the attempt has returned by then).
import type { GatewayContext } from '../../../kernel/context.ts';
import { GatewayError } from '../../../kernel/errors.ts';
import type { RequestTiming } from '../../../kernel/service.ts';
import { metrics } from '../../../kernel/metrics.ts';
import { adapters } from '../providers/index.ts';
import type { NativeApi, ProviderAdapter, ProviderCall } from '../providers/types.ts';
import type { ModelDef, ResolvedProvider } from '../catalog/registry.ts';
import { streamIdleMs, upstreamTimeoutMs } from '../catalog/resolve.ts';
import { registryOf } from '../state.ts';
import { CLIENT_CLOSED, deadline, retryAfterOf, toGatewayError, type Deadline } from '../upstream/errors.ts';
import { healthKey, healthOf } from './health.ts';
import { builtinUpstream, upstreamTableOf, type Upstream } from './upstreams.ts';

/** One upstream, ready to call for one model. */
export interface Target {
  upstream: Upstream;
  /** The model id to send upstream. */
  upstreamModel: string;
  provider: ResolvedProvider;
  adapter: ProviderAdapter;
  call: ProviderCall;
  timeoutMs: number;
}

/** Who learns which upstream served the call and after how many attempts (the meter). */
export interface RouteObserver {
  routed(upstream: string, attempts: number): void;
}

const RETRYABLE = new Set(['upstream_error', 'upstream_unavailable', 'upstream_timeout', 'upstream_rate_limited', 'upstream_auth_failed', 'upstream_stream_failed']);

/** The enabled upstreams that serve this model now (cooling ones included). */
export function candidatesOf(gw: GatewayContext, model: ModelDef): Upstream[] {
  const out: Upstream[] = [];
  const reg = registryOf(gw);
  const slot = model.provider ? reg.providers.get(model.provider) : undefined;
  if (slot && reg.missing(gw.env, model).length === 0) out.push(builtinUpstream(gw.env, slot, [model]));
  for (const u of upstreamTableOf(gw).serving(model.id)) if (u.enabled) out.push(u);
  return out;
}

/** Targets by gateway, upstream and model: built once while the upstream (and the timeout) stay the same. */
const targets = new WeakMap<GatewayContext, WeakMap<Upstream, Map<string, Target>>>();

export function targetOf(gw: GatewayContext, u: Upstream, model: ModelDef): Target {
  let byUpstream = targets.get(gw);
  if (!byUpstream) targets.set(gw, (byUpstream = new WeakMap()));
  let byModel = byUpstream.get(u);
  if (!byModel) byUpstream.set(u, (byModel = new Map()));
  const t = byModel.get(model.id);
  const timeoutMs = u.timeoutMs ?? upstreamTimeoutMs(gw);
  if (t && t.timeoutMs === timeoutMs && t.upstreamModel === upstreamModelOf(u, model)) return t;
  const made = makeTarget(gw, u, model);
  if (byModel.size < 1000) byModel.set(model.id, made);
  return made;
}

/** The id sent upstream: the upstream's entry for the model; a plain entry of a database model sends its upstream_model. */
function upstreamModelOf(u: Upstream, model: ModelDef): string {
  const named = u.models.get(model.id);
  return named === undefined || (named === model.id && model.source === 'database') ? model.upstream : named;
}

function makeTarget(gw: GatewayContext, u: Upstream, model: ModelDef): Target {
  const provider: ResolvedProvider = { slot: u.slot, apiKey: u.apiKey, baseUrl: u.baseUrl };
  return {
    upstream: u,
    upstreamModel: upstreamModelOf(u, model),
    provider,
    adapter: adapters[u.kind],
    call: { provider, http: gw.http },
    timeoutMs: u.timeoutMs ?? upstreamTimeoutMs(gw),
  };
}

/** The upstream's own endpoint for a client API it speaks natively (forwarded, not translated), or null. */
export function nativeUrlOf(u: Upstream, api: NativeApi): string | null {
  return adapters[u.kind].nativeUrl?.({ slot: u.slot, apiKey: u.apiKey, baseUrl: u.baseUrl }, api) ?? null;
}

function num(gw: GatewayContext, key: string, dflt: number, min: number, max: number): number {
  const v = Number(gw.env.get(key));
  return Number.isFinite(v) && v >= min ? Math.min(max, v) : dflt;
}

export const maxAttempts = (gw: GatewayContext) => Math.floor(num(gw, 'AI_MAX_ATTEMPTS', 3, 1, 10));

/** Weighted random pick (weights ≥ 1). */
function weighted(list: Upstream[]): Upstream {
  let total = 0;
  for (const u of list) total += u.weight;
  let r = Math.random() * total;
  for (const u of list) if ((r -= u.weight) < 0) return u;
  return list[list.length - 1];
}

/** The next upstream to try: callable now, untried first, lowest priority, then by weight. */
function pick(gw: GatewayContext, all: Upstream[], tried: Set<string>, model: string): Upstream | undefined {
  const h = healthOf(gw);
  const now = Date.now();
  // The common case, one upstream on a first try: no lists to build.
  if (all.length === 1 && tried.size === 0) return h.callable(healthKey(all[0].id, model), now) ? all[0] : undefined;
  const open = all.filter((u) => h.callable(healthKey(u.id, model), now));
  if (!open.length) return undefined;
  const fresh = open.filter((u) => !tried.has(u.id));
  const pool = fresh.length ? fresh : open;
  let best = Infinity;
  for (const u of pool) best = Math.min(best, u.priority);
  return weighted(pool.filter((u) => u.priority === best));
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (ms <= 0 || signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

export interface RouteOptions {
  model: ModelDef;
  /** The operation name for metrics (gen_ai.operation.name): chat, text_completion, image, … */
  operation: string;
  signal: AbortSignal;
  timing?: RequestTiming;
  observer?: RouteObserver;
  /** Which upstreams can serve this request (e.g. only those that speak an API natively); default all. */
  serves?: (u: Upstream) => boolean;
  /** candidatesOf(model) when the caller has it already (resolveModel's). */
  candidates?: Upstream[];
}

/**
 * Calls the model through its upstreams until one attempt succeeds. The attempt gets the target
 * and a deadline (the client's signal plus the upstream's timeout, for the time before the first
 * byte); on success it owns the deadline (stopTimer/clear it when the answer ends). Throws the
 * last attempt's GatewayError when every attempt failed, or 503 when every upstream cools down.
 */
export async function route<T>(gw: GatewayContext, o: RouteOptions, attempt: (t: Target, d: Deadline) => Promise<T>): Promise<T> {
  const known = o.candidates ?? candidatesOf(gw, o.model);
  const all = o.serves ? known.filter(o.serves) : known;
  const h = healthOf(gw);
  const m = metrics();
  const max = maxAttempts(gw);
  // read when a retry needs them
  const backoffMs = () => num(gw, 'AI_RETRY_BACKOFF_MS', 100, 0, 60_000);
  const retryAfterMax = () => num(gw, 'AI_RETRY_AFTER_MAX_MS', 10_000, 0, 600_000);
  const tried = new Set<string>();
  const key = (u: Upstream) => healthKey(u.id, o.model.id);
  let last: GatewayError | undefined;
  let lastId: string | undefined;
  let retryAfter: number | undefined;
  for (let n = 1; n <= max; n++) {
    let u = pick(gw, all, tried, o.model.id);
    if (!u && n > 1 && lastId) {
      // Nothing callable now. When the one that failed asked to wait (Retry-After) a bounded
      // time, or cools down for no longer than that, wait and try it again.
      const soonest = all.reduce<Upstream | undefined>((a, b) => (!a || h.readyAt(key(b)) < h.readyAt(key(a)) ? b : a), undefined);
      const wait = soonest ? h.readyAt(key(soonest)) - Date.now() : Infinity;
      if (soonest && wait <= retryAfterMax()) {
        // a few ms past it: timers run on a monotonic clock, readiness is judged by Date.now()
        await timed(o, () => sleep(Math.max(0, wait) + 5, o.signal));
        u = pick(gw, all, tried, o.model.id);
      }
    } else if (u && n > 1) {
      // jittered exponential backoff; Retry-After when trying the same upstream again
      const base = Math.min(backoffMs() * 2 ** (n - 2), 4000) * (0.5 + Math.random() / 2);
      const wait = u.id === lastId && retryAfter !== undefined ? retryAfter : base;
      if (wait > retryAfterMax()) break;
      await timed(o, () => sleep(wait, o.signal));
    }
    if (o.signal.aborted) throw new GatewayError(499, CLIENT_CLOSED, 'The client closed the request.');
    if (!u) break;
    tried.add(u.id);
    lastId = u.id;
    retryAfter = undefined;
    const t = targetOf(gw, u, o.model);
    const k = key(u);
    h.begin(k);
    const d = deadline(o.signal, t.timeoutMs, streamIdleMs(gw));
    o.observer?.routed(u.id, n);
    // OpenTelemetry: a client span per attempt (only when the request is traced)
    const span = o.timing?.trace?.attempt({
      operation: o.operation,
      provider: u.kind,
      requestModel: o.model.id,
      responseModel: t.upstreamModel,
      upstream: u.id,
      baseUrl: u.baseUrl,
      carrier: [d, d.signal],
    });
    const t0 = performance.now();
    try {
      const out = await attempt(t, d);
      span?.answered(o.observer !== undefined);
      const s = (performance.now() - t0) / 1000;
      if (o.timing) o.timing.upstreamMs += s * 1000;
      h.success(k);
      m.attempts.inc({ upstream: u.id, model: o.model.id, outcome: 'ok' });
      m.upstreamDuration.observe({ gen_ai_operation_name: o.operation, gen_ai_request_model: o.model.id, upstream: u.id, error_type: '' }, s);
      return out;
    } catch (e) {
      const s = (performance.now() - t0) / 1000;
      if (o.timing) o.timing.upstreamMs += s * 1000;
      d.clear();
      let ge: GatewayError;
      try {
        ge = toGatewayError(e, d);
      } catch (bug) {
        h.release(k); // not an upstream failure but a bug: thrown on as is
        span?.fail('internal_error');
        throw bug;
      }
      span?.fail(ge.code);
      m.attempts.inc({ upstream: u.id, model: o.model.id, outcome: ge.code });
      m.upstreamDuration.observe({ gen_ai_operation_name: o.operation, gen_ai_request_model: o.model.id, upstream: u.id, error_type: ge.code }, s);
      last = ge;
      if (!RETRYABLE.has(ge.code) || o.signal.aborted) {
        h.release(k); // no verdict on the upstream (input error, client gone)
        throw ge;
      }
      retryAfter = retryAfterOf(e);
      h.failure(k, ge.status === 429 ? retryAfter : undefined, u.id);
      m.failures.inc({ upstream: u.id, reason: ge.code });
      gw.log('warn', 'ai: upstream attempt failed', { upstream: u.id, model: o.model.id, attempt: n, code: ge.code });
    }
  }
  if (last) throw last;
  const soon = Math.min(...all.map((u) => h.readyAt(key(u))));
  const secs = Number.isFinite(soon) ? Math.max(1, Math.ceil((soon - Date.now()) / 1000)) : 1;
  throw new GatewayError(503, 'upstreams_cooling_down', `Every upstream of '${o.model.id}' is cooling down after failures; try again in ${secs} s.`, {
    headers: { 'retry-after': String(secs) },
  });
}

/** What an endpoint's attempt returns: makes the client's response (and settles the call) once routing is done. */
export type Responder = () => Response | Promise<Response>;

/** A metered call: routing reports to it, and a call that fails on every upstream ends its record. */
export interface RoutedCall extends RouteObserver {
  finish(status: 'error' | 'aborted', used: object, errorCode: string): Promise<void>;
}

/**
 * route() for an endpoint's metered call (every AI endpoint goes through here): the call learns
 * the upstream and attempt count, and when no attempt succeeds it is finished once as failed
 * (nothing charged, the hold released) before the error goes to the client.
 */
export async function routeCall<T>(
  ctx: { gateway: GatewayContext; signal: AbortSignal; timing?: RequestTiming },
  call: RoutedCall,
  o: Omit<RouteOptions, 'signal' | 'timing' | 'observer'>,
  attempt: (t: Target, d: Deadline) => Promise<T>,
): Promise<T> {
  try {
    return await route(ctx.gateway, { ...o, signal: ctx.signal, timing: ctx.timing, observer: call }, attempt);
  } catch (e) {
    const code = (e as { code?: string }).code ?? 'internal_error';
    await call.finish(code === CLIENT_CLOSED ? 'aborted' : 'error', {}, code);
    throw e;
  }
}

async function timed(o: RouteOptions, f: () => Promise<void>): Promise<void> {
  const t0 = performance.now();
  await f();
  if (o.timing) o.timing.upstreamMs += performance.now() - t0;
}
