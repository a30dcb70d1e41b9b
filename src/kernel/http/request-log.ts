// The first middleware of every request: its timing (x-citygate-overhead-ms), metrics and log line.
import type { MiddlewareHandler } from 'hono';
import { boundCity, type Identity } from '../identity.ts';
import type { Logger } from '../log.ts';
import { metrics } from '../metrics.ts';
import type { RequestTiming } from '../service.ts';

/** Paths counted under their own metric label (anything else unknown is 'other'). */
export const FIXED_ROUTES = new Set(['/', '/health', '/health/live', '/health/ready', '/metrics', '/.well-known/jwks.json', '/openapi.json', '/docs', '/docs/scalar.js', '/v1/services']);

export function requestLog(log: Logger, addHeaders: ((platform: unknown, headers: Record<string, string>) => boolean) | undefined): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    const timing: RequestTiming = { startedAt: started, upstreamMs: 0, whenReady: [] };
    c.set('timing' as never, timing as never);
    try {
      await next();
    } finally {
      // Time spent in citygate, upstream waits excluded (for a stream: up to its first byte). A
      // stream's usage record, written after its last chunk, reports it; the records waiting for
      // it are written now, even when the handler's error escaped (a record is money).
      timing.overheadMs = Math.max(0, performance.now() - started - timing.upstreamMs);
      const waiting = timing.whenReady!;
      timing.whenReady = undefined;
      for (const run of waiting) run();
    }
    const overhead = timing.overheadMs;
    const requestId = c.get('requestId' as never) as string | undefined;
    const extra: Record<string, string> = { 'x-citygate-overhead-ms': overhead.toFixed(2) };
    if (requestId) extra['x-request-id'] = requestId;
    if (timing.headers) Object.assign(extra, timing.headers);
    if (!addHeaders?.(c.env, extra)) {
      try {
        for (const k in extra) c.res.headers.set(k, extra[k]);
      } catch {
        /* immutable headers (a proxied Response): leave them */
      }
    }
    const identity = c.get('identity' as never) as Identity | undefined;
    const duration = performance.now() - started;
    // An action's route is known: the URL is parsed only for the other paths.
    const action = c.get('route' as never) as string | undefined;
    const route = action ?? new URL(c.req.url).pathname;
    // Metric labels stay bounded: an unknown path counts as 'other'.
    const m = metrics();
    const label = { route: action || FIXED_ROUTES.has(route) ? route : 'other', method: c.req.method, status: String(c.res.status) };
    m.requests.inc(label);
    m.requestDuration.observe(label, duration / 1000);
    m.overhead.observe({ route: label.route }, overhead / 1000);
    log('info', 'request', {
      method: c.req.method,
      route,
      status: c.res.status,
      duration_ms: Math.round(duration * 100) / 100,
      identity: identity?.kind,
      city: identity ? boundCity(identity) ?? c.get('city' as never) ?? null : null,
    });
  };
}
