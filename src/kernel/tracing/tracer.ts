// The tracer (loaded only when tracing is on): spans per request and per upstream attempt,
// exported as OTLP/HTTP JSON (otlp.ts). Incoming `traceparent` (W3C Trace Context) is the
// parent of the server span; each attempt's span id goes upstream in its own traceparent.
//
// Not the OpenTelemetry SDK: its context manager needs AsyncLocalStorage (node:async_hooks,
// absent from a Worker built without nodejs_compat) and its browser exporter XHR/sendBeacon;
// here a request's trace rides on the request's own timing object, so the same ~200 lines run
// on Node and in workerd, and on Workers the export goes out in the request's waitUntil.
import type { Context, Next } from 'hono';
import { boundCity, type Identity } from '../identity.ts';
import type { RequestTiming } from '../service.ts';
import type { AttemptSpan, RequestTrace } from './index.ts';
import { OtlpExporter, type Attrs, type Span } from './otlp.ts';

// Ids need to be unique, not secret: 32 random bits at a time from Math.random (no syscall).
const hex8 = (): string => (Math.random() * 0x1_0000_0000 >>> 0).toString(16).padStart(8, '0');
const hex = (bytes: 8 | 16): string => (bytes === 8 ? hex8() + hex8() : hex8() + hex8() + hex8() + hex8());
/** Epoch milliseconds with sub-ms precision (turned into nanoseconds only at export). */
const nowMs = (): number => performance.timeOrigin + performance.now();

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

const hashes = new Map<string, string>();

/** The user's hash, computed once per user (a bounded cache: digests are not free). */
async function userHash(cityId: string, userId: string): Promise<string> {
  const key = `${cityId}\n${userId}`;
  const hit = hashes.get(key);
  if (hit !== undefined) return hit;
  const d = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key));
  let s = '';
  for (const x of new Uint8Array(d).subarray(0, 16)) s += x.toString(16).padStart(2, '0');
  if (hashes.size >= 10_000) hashes.clear();
  hashes.set(key, s);
  return s;
}

const hosts = new Map<string, string | null>();

/** An upstream's host (server.address), parsed once per base URL. */
function hostOf(baseUrl: string): string | null {
  let h = hosts.get(baseUrl);
  if (h === undefined) {
    try {
      h = new URL(baseUrl).host;
    } catch {
      h = null;
    }
    if (hosts.size < 1000) hosts.set(baseUrl, h);
  }
  return h;
}

/** GenAI semantic-convention provider names for citygate's upstream kinds. */
const PROVIDERS: Record<string, string> = { openai: 'openai', anthropic: 'anthropic', google: 'gcp.gemini', gemini: 'gcp.gemini' };

class Trace implements RequestTrace {
  readonly traceId: string;
  readonly spanId = hex(8);
  readonly parentId: string | undefined;
  readonly spans: Span[] = [];
  #open: { span: Span } | null = null;
  #serverDone = false;
  #tracer: Tracer;

  constructor(tracer: Tracer, incoming: string | undefined) {
    this.#tracer = tracer;
    const m = incoming ? TRACEPARENT.exec(incoming.trim().toLowerCase()) : null;
    const valid = m && !/^0+$/.test(m[1]) && !/^0+$/.test(m[2]);
    this.traceId = valid ? m[1] : hex(16);
    this.parentId = valid ? m[2] : undefined;
  }

  attempt(a: Parameters<RequestTrace['attempt']>[0]): AttemptSpan {
    const span: Span = {
      traceId: this.traceId,
      spanId: hex(8),
      parentSpanId: this.spanId,
      name: `${a.operation} ${a.requestModel}`,
      kind: 3, // CLIENT
      start: nowMs(),
      end: 0,
      attrs: {
        'gen_ai.operation.name': a.operation,
        'gen_ai.provider.name': PROVIDERS[a.provider] ?? a.provider,
        'gen_ai.request.model': a.requestModel,
        'gen_ai.response.model': a.responseModel,
        'citygate.upstream': a.upstream,
      },
      status: 0,
    };
    const host = a.baseUrl ? hostOf(a.baseUrl) : null;
    if (host) span.attrs['server.address'] = host;
    const tp = `00-${this.traceId}-${span.spanId}-01`;
    for (const c of a.carrier) {
      const { traceparents } = this.#tracer.index;
      traceparents.set(c, tp);
    }
    this.spans.push(span);
    return {
      fail: (errorType) => {
        span.end = nowMs();
        span.attrs['error.type'] = errorType;
        span.status = 2;
      },
      answered: (metered) => {
        if (metered) this.#open = { span };
        else span.end = nowMs();
      },
    };
  }

  usage(u: Parameters<RequestTrace['usage']>[0]): void {
    const open = this.#open;
    if (!open) return;
    this.#open = null;
    const s = open.span;
    s.end = nowMs();
    s.attrs['gen_ai.usage.input_tokens'] = u.inputTokens;
    s.attrs['gen_ai.usage.output_tokens'] = u.outputTokens;
    s.attrs['citygate.credits'] = u.credits;
    if (u.status !== 'ok') {
      s.attrs['error.type'] = u.status;
      s.status = 2;
    }
    if (this.#serverDone) this.#tracer.export(this);
  }

  /** The server span is over: export now, or when the call's usage comes (a stream ends later). */
  serverDone(): void {
    this.#serverDone = true;
    if (!this.#open) this.#tracer.export(this);
  }
}

export class Tracer {
  readonly exporter: OtlpExporter;
  readonly index: typeof import('./index.ts');

  constructor(exporter: OtlpExporter, index: typeof import('./index.ts')) {
    this.exporter = exporter;
    this.index = index;
  }

  /** The middleware body: the request's server span around the rest of the chain. */
  async server(c: Context, next: Next): Promise<void> {
    const timing = c.get('timing' as never) as RequestTiming | undefined;
    const trace = new Trace(this, c.req.header('traceparent'));
    if (timing) timing.trace = trace;
    const start = nowMs();
    try {
      await next();
    } finally {
      const identity = c.get('identity' as never) as Identity | undefined;
      const route = (c.get('route' as never) as string | undefined) ?? null;
      const status = c.res?.status ?? 500;
      const attrs: Attrs = { 'http.request.method': c.req.method, 'http.response.status_code': status };
      if (route) attrs['http.route'] = route;
      const city = identity ? (boundCity(identity) ?? (c.get('city' as never) as string | undefined) ?? null) : null;
      if (city) attrs['citygate.city'] = city;
      if (identity) attrs['citygate.identity'] = identity.kind;
      if (identity?.kind === 'user') attrs['user.hash'] = hashes.get(`${identity.cityId}\n${identity.userId}`) ?? (await userHash(identity.cityId, identity.userId));
      trace.spans.unshift({
        traceId: trace.traceId,
        spanId: trace.spanId,
        parentSpanId: trace.parentId,
        name: route ? `${c.req.method} ${route}` : c.req.method,
        kind: 2, // SERVER
        start,
        end: nowMs(),
        attrs,
        status: status >= 500 ? 2 : 0,
      });
      trace.serverDone();
    }
  }

  export(t: Trace): void {
    this.exporter.add(t.spans);
  }
}
