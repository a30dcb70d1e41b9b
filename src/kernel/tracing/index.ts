// OpenTelemetry traces, off unless OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set in
// the process environment (Workers: a var or secret). This file is all that loads when it is
// off: the gateway then registers no middleware and wraps nothing, so a request pays nothing
// and an upstream attempt one `timing.trace` check. When on, tracer.ts is imported (dynamically)
// and every request is a server span, every upstream attempt a client span with the GenAI
// semantic-convention attributes (docs/observability.md).
import type { UpstreamHttp } from '../http.ts';
import type { ProcessEnv } from '../runtime-env.ts';

/** The OTLP/HTTP traces URL, or null when tracing is off. */
export function otlpTracesUrl(env: ProcessEnv | undefined): string | null {
  if (!env) return null;
  if (/^true$/i.test(env.OTEL_SDK_DISABLED ?? '') || /^none$/i.test(env.OTEL_TRACES_EXPORTER ?? '')) return null;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? `${base.replace(/\/+$/, '')}/v1/traces` : null;
}

/** One upstream attempt's span, as routing sees it. */
export interface AttemptSpan {
  /** The attempt failed (or was cut): ends the span with its error type. */
  fail(errorType: string): void;
  /** The attempt answered: when `metered`, the span stays open until the call's usage is known (RequestTrace.usage). */
  answered(metered: boolean): void;
}

/** A request's trace, on RequestTiming.trace when tracing is on. */
export interface RequestTrace {
  attempt(a: { operation: string; provider: string; requestModel: string; responseModel: string; upstream: string; baseUrl: string | null | undefined; carrier: object[] }): AttemptSpan;
  /** The call's measured usage and credits: ends the attempt that answered. */
  usage(u: { inputTokens: number; outputTokens: number; credits: number; status: string }): void;
}

/** Carriers (an attempt's deadline, its signal) → the traceparent its upstream call sends. */
export const traceparents = new WeakMap<object, string>();

/**
 * The upstream client, with the traceparent of the attempt that makes the call: routing files
 * it under the attempt's deadline (what request() gets as `abort`) and its signal (what the
 * AI SDK hands fetch). Used only when tracing is on.
 */
export function propagating(http: UpstreamHttp): UpstreamHttp {
  return {
    ...http,
    request(r) {
      const tp = (r.abort && traceparents.get(r.abort)) || (r.signal && traceparents.get(r.signal));
      return http.request(tp ? { ...r, headers: { ...r.headers, traceparent: tp } } : r);
    },
    fetch(input, init) {
      const tp = init?.signal ? traceparents.get(init.signal) : undefined;
      if (!tp) return http.fetch(input, init);
      const headers = new Headers(init?.headers);
      headers.set('traceparent', tp);
      return http.fetch(input, { ...init, headers });
    },
    untrusted: http.untrusted,
  };
}
