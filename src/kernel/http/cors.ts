// CORS for browsers only: CORS_ORIGINS (comma-separated, or * / unset for any origin).
import type { Context } from 'hono';
import { cors } from 'hono/cors';
import type { RuntimeEnv } from '../runtime-env.ts';

/**
 * Only browsers need it, and they always send Origin, so other callers skip that middleware
 * (it touches c.res before the handler, which makes Hono copy every response).
 */
export function corsForBrowsers(env: RuntimeEnv): (c: Context, next: () => Promise<void>) => Promise<void | Response> {
  const corsMiddleware = cors({
    origin: (origin) => {
      const allowed = env.get('CORS_ORIGINS');
      if (!allowed || allowed.trim() === '*') return origin || '*';
      return allowed.split(',').map((o) => o.trim()).includes(origin) ? origin : null;
    },
    allowMethods: ['GET', 'POST', 'OPTIONS'],
    allowHeaders: ['Authorization', 'Content-Type', 'X-Requested-With'],
    exposeHeaders: ['x-citygate-overhead-ms', 'x-request-id', 'x-citygate-plan-remaining', 'x-citygate-plan-window'],
    maxAge: 600,
  });
  return (c, next) => (c.req.header('origin') ? corsMiddleware(c, next) : next());
}
