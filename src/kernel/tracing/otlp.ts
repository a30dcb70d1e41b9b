// A small OTLP/HTTP JSON exporter (opentelemetry-proto's JSON mapping: ids in hex, times as
// decimal strings of nanoseconds): spans are buffered and POSTed to the traces URL every
// OTEL_BSP_SCHEDULE_DELAY ms (default 5000) or when OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512) are
// waiting; on Workers (no timers between requests) a batch goes out in the waitUntil of the
// request that completed it. OTEL_EXPORTER_OTLP_HEADERS (k=v,…) and OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES are honoured. A failed export is dropped (traces are best effort).
import type { ProcessEnv } from '../runtime-env.ts';

export type Attrs = Record<string, string | number | boolean>;

export interface Span {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** 2 SERVER, 3 CLIENT */
  kind: number;
  /** Epoch milliseconds (fractional). */
  start: number;
  end: number;
  attrs: Attrs;
  /** 0 unset, 2 error */
  status: number;
}

const MAX_BUFFER = 2048;

function value(v: string | number | boolean) {
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
}
/** Epoch ms → the decimal string of nanoseconds OTLP/JSON wants (µs precision, no BigInt). */
function nanos(ms: number): string {
  const whole = Math.floor(ms);
  return `${whole}${String(Math.floor((ms - whole) * 1000)).padStart(3, '0')}000`;
}
const kv = (attrs: Attrs) => Object.entries(attrs).map(([key, v]) => ({ key, value: value(v) }));

function pairs(s: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (s ?? '').split(',')) {
    const i = part.indexOf('=');
    if (i > 0) out[decodeURIComponent(part.slice(0, i).trim())] = decodeURIComponent(part.slice(i + 1).trim());
  }
  return out;
}

export class OtlpExporter {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly resource: Attrs;
  readonly delayMs: number;
  readonly batch: number;
  /** Workers: hands each export to the request's waitUntil instead of a timer. */
  readonly immediate: ((p: Promise<unknown>) => void) | null;
  #spans: Span[] = [];
  #timer: ReturnType<typeof setTimeout> | null = null;
  #inflight = new Set<Promise<void>>();

  constructor(url: string, env: ProcessEnv, immediate: ((p: Promise<unknown>) => void) | null, version: string) {
    this.url = url;
    this.headers = { 'content-type': 'application/json', ...pairs(env.OTEL_EXPORTER_OTLP_HEADERS), ...pairs(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS) };
    this.resource = { 'service.name': 'citygate', 'service.version': version, ...pairs(env.OTEL_RESOURCE_ATTRIBUTES) };
    if (env.OTEL_SERVICE_NAME) this.resource['service.name'] = env.OTEL_SERVICE_NAME;
    const d = Number(env.OTEL_BSP_SCHEDULE_DELAY);
    this.delayMs = Number.isFinite(d) && d >= 0 && env.OTEL_BSP_SCHEDULE_DELAY ? d : 5000;
    const b = Number(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE);
    this.batch = Number.isInteger(b) && b > 0 ? b : 512;
    this.immediate = immediate;
  }

  add(spans: Span[]): void {
    if (this.#spans.length + spans.length > MAX_BUFFER) return; // the collector is behind: drop, never grow
    this.#spans.push(...spans);
    if (this.immediate) return this.immediate(this.flush());
    if (this.#spans.length >= this.batch) void this.flush();
    else if (!this.#timer) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        void this.flush();
      }, this.delayMs);
      (this.#timer as { unref?: () => void }).unref?.();
    }
  }

  /** Sends what is buffered; resolves when every export so far has ended. */
  async flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const spans = this.#spans.splice(0);
    if (spans.length) {
      const p = this.#send(spans);
      this.#inflight.add(p);
      void p.finally(() => this.#inflight.delete(p));
    }
    await Promise.allSettled([...this.#inflight]);
  }

  async #send(spans: Span[]): Promise<void> {
    const body = JSON.stringify({
      resourceSpans: [
        {
          resource: { attributes: kv(this.resource) },
          scopeSpans: [
            {
              scope: { name: 'citygate' },
              spans: spans.map((s) => ({
                traceId: s.traceId,
                spanId: s.spanId,
                ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
                name: s.name,
                kind: s.kind,
                startTimeUnixNano: nanos(s.start),
                endTimeUnixNano: nanos(s.end || s.start),
                attributes: kv(s.attrs),
                status: { code: s.status },
              })),
            },
          ],
        },
      ],
    });
    try {
      const res = await fetch(this.url, { method: 'POST', headers: this.headers, body, signal: AbortSignal.timeout(10_000) });
      await res.body?.cancel().catch(() => {});
    } catch {
      /* best effort: a collector that is away loses these spans */
    }
  }
}

export async function createTracer(url: string, env: ProcessEnv, immediate: ((p: Promise<unknown>) => void) | null, version: string) {
  const [{ Tracer }, index] = await Promise.all([import('./tracer.ts'), import('./index.ts')]);
  return new Tracer(new OtlpExporter(url, env, immediate, version), index);
}
