// createGateway → one Web-standard fetch handler (Hono) that runs unchanged on Node and Workers.
import { Hono, type Context } from 'hono';
import { cors } from 'hono/cors';
import { z } from 'zod';
import type { Db } from '../db/database.ts';
import { migrate } from '../db/migrate.ts';
import { authenticate } from './authenticate.ts';
import { CityStatusCache } from './city-status.ts';
import type { GatewayConfig, GatewayContext } from './context.ts';
import { GatewayError, isGatewayError, notFound } from './errors.ts';
import { boundCity, type Identity } from './identity.ts';
import { parseJsonBody, parseQuery, readBody, validate } from './input.ts';
import type { JobMessage, JobQueue } from './jobs.ts';
import { jsonLogger, type Logger } from './log.ts';
import { ADMIN_KEY_PREFIX } from './identity.ts';
import { randomToken, requestId as newRequestId } from './crypto.ts';
import { RuntimeEnv, type ProcessEnv } from './runtime-env.ts';
import type { AnyAction, RequestTiming, ServiceDef } from './service.ts';
import type { BlobStore } from './storage.ts';
import { fetchHttp, type UpstreamHttp } from './http.ts';
import { KeyRing } from './tokens.ts';
import { openApiDocument } from './openapi.ts';
import { SCALAR_CDN, docsPage } from './docs.ts';

export interface GatewayOptions {
  db: Db;
  services: ServiceDef[];
  /** The process environment (Node) or the Worker's bindings (edge). */
  processEnv?: ProcessEnv;
  jobs?: JobQueue;
  storage?: BlobStore | null;
  /** Outbound HTTP to upstream providers (undici pool on Node); default: the platform's fetch. */
  http?: UpstreamHttp;
  logger?: Logger;
  config?: Partial<GatewayConfig>;
  envTtlMs?: number;
  /**
   * The runtime's keep-alive for background work (gw.waitUntil), besides the gateway's own
   * tracking: on Workers, the waitUntil of the request (or queue batch) whose code started it.
   */
  waitUntil?: (p: Promise<unknown>) => void;
  /** Scalar's standalone script for /docs, served by the gateway itself when given. */
  docsScript?: () => Promise<BodyInit | null>;
}

export interface InitResult {
  /** The admin key, when this boot generated it (to be shown once). */
  generatedAdminKey: string | null;
}

export interface Gateway {
  fetch(req: Request, ...rest: unknown[]): Promise<Response>;
  /** Migrations, admin key, signing key, services' init. Idempotent; concurrent-safe. */
  init(): Promise<InitResult>;
  health(): Promise<{ ok: boolean; services: string[] }>;
  /** Runs one background job (called by the runtime's queue consumer). */
  runJob(msg: JobMessage): Promise<void>;
  /** Graceful stop: services flush, background work settles. Does not close the database. */
  stop(): Promise<void>;
  /** Resolves once no background work is pending (Workers hand it to ctx.waitUntil). */
  idle(): Promise<void>;
  readonly context: GatewayContext;
}

const DEFAULT_CONFIG: GatewayConfig = {
  name: 'citygate',
  version: '0.1.0',
  localLogin: true,
  maxBodyBytes: 1024 * 1024,
  gracefulStop: true,
};

const SERVICE_ID = /^[a-z][a-z0-9-]*$/;

export function createGateway(opts: GatewayOptions): Gateway {
  const config: GatewayConfig = { ...DEFAULT_CONFIG, ...opts.config };
  const log = opts.logger ?? jsonLogger();
  const env = new RuntimeEnv(opts.db, opts.processEnv ?? {}, opts.envTtlMs);
  const keys = new KeyRing(opts.db);
  const cities = new CityStatusCache(opts.db);
  const services = new Map<string, ServiceDef>();
  for (const s of opts.services) {
    if (!SERVICE_ID.test(s.id) || s.id === 'services') throw new Error(`invalid service id: ${s.id}`);
    if (services.has(s.id)) throw new Error(`service mounted twice: ${s.id}`);
    services.set(s.id, s);
  }
  const capabilities = new Map<string, unknown>();
  const pending = new Set<Promise<unknown>>();

  const context: GatewayContext = {
    db: opts.db,
    env,
    keys,
    cities,
    jobs: opts.jobs ?? inlineQueue(() => gateway),
    storage: opts.storage ?? null,
    http: opts.http ?? fetchHttp(),
    log,
    config,
    services,
    provide: (name, impl) => void capabilities.set(name, impl),
    use: <T>(name: string) => capabilities.get(name) as T | undefined,
    waitUntil(p) {
      const tracked = p.catch((e) => log('error', 'background work failed', { error: String(e) })).finally(() => pending.delete(tracked));
      pending.add(tracked);
      opts.waitUntil?.(tracked);
    },
    publicOrigin(req) {
      const configured = env.get('GATEWAY_CITY_BASE_URL');
      if (configured) {
        try {
          return new URL(configured).origin;
        } catch {
          /* fall through to the request's origin */
        }
      }
      return req ? new URL(req.url).origin : `http://127.0.0.1`;
    },
  };

  let initPromise: Promise<InitResult> | null = null;
  const init = () =>
    (initPromise ??= (async () => {
      await migrate(opts.db);
      const proposed = (opts.processEnv ?? {}).GATEWAY_ADMIN_SECRET_KEY || `${ADMIN_KEY_PREFIX}${randomToken(32)}`;
      const admin = await env.setIfAbsent('GATEWAY_ADMIN_SECRET_KEY', proposed);
      await keys.ensure();
      await env.refresh();
      for (const s of services.values()) await s.init?.(context);
      const generated = admin.inserted && !(opts.processEnv ?? {}).GATEWAY_ADMIN_SECRET_KEY ? admin.value : null;
      return { generatedAdminKey: generated };
    })().catch((e) => {
      initPromise = null; // let the next request try again
      throw e;
    }));

  const app = new Hono();

  app.use('*', async (c, next) => {
    const started = performance.now();
    const timing: RequestTiming = { startedAt: started, upstreamMs: 0 };
    c.set('timing' as never, timing as never);
    await next();
    // Time spent in citygate, upstream waits excluded (for a stream: up to its first byte).
    const overhead = Math.max(0, performance.now() - started - timing.upstreamMs);
    const requestId = c.get('requestId' as never) as string | undefined;
    try {
      c.res.headers.set('x-citygate-overhead-ms', overhead.toFixed(2));
      if (requestId) c.res.headers.set('x-request-id', requestId);
    } catch {
      /* immutable headers (a proxied Response): leave them */
    }
    const identity = c.get('identity' as never) as Identity | undefined;
    log('info', 'request', {
      method: c.req.method,
      route: c.get('route' as never) ?? new URL(c.req.url).pathname,
      status: c.res.status,
      duration_ms: Math.round((performance.now() - started) * 100) / 100,
      identity: identity?.kind,
      city: identity ? boundCity(identity) ?? c.get('city' as never) ?? null : null,
    });
  });

  // Before CORS: a preflight answered by the CORS middleware must see a fresh env too
  // (CORS_ORIGINS changed by another process), not a snapshot only other requests refresh.
  app.use('*', async (_c, next) => {
    await init();
    await env.fresh();
    await next();
  });

  const corsMiddleware = cors({
      origin: (origin) => {
        const allowed = env.get('CORS_ORIGINS');
        if (!allowed || allowed.trim() === '*') return origin || '*';
        return allowed.split(',').map((o) => o.trim()).includes(origin) ? origin : null;
      },
      allowMethods: ['GET', 'POST', 'OPTIONS'],
      allowHeaders: ['Authorization', 'Content-Type', 'X-Requested-With'],
      exposeHeaders: ['x-citygate-overhead-ms', 'x-request-id'],
      maxAge: 600,
    });
  // Only browsers need CORS, and they always send Origin: other callers skip the middleware
  // (it touches c.res before the handler, which makes Hono copy every response).
  app.use('*', (c, next) => (c.req.header('origin') ? corsMiddleware(c, next) : next()));

  app.get('/', (c) =>
    c.json({ name: config.name, version: config.version, ok: true, health: '/health', docs: '/docs' }),
  );

  const health = async () => {
    await init();
    return { ok: true, services: [...services.keys()] };
  };
  app.get('/health', async (c) => c.json(await health()));

  app.get('/.well-known/jwks.json', (c) => {
    c.header('cache-control', 'public, max-age=300');
    return c.json(keys.jwks());
  });

  app.get('/v1/services', async (c) => {
    const identity = await authenticate(c.req.raw, context);
    c.set('identity' as never, identity as never);
    const admin = identity.kind === 'admin';
    return c.json({
      items: [...services.values()].map((s) => ({
        id: s.id,
        name: s.name,
        env: (s.env ?? []).map((e) => ({ ...e, ...(admin ? { configured: env.has(e.key) } : {}) })),
      })),
    });
  });

  let openapi: unknown = null;
  app.get('/openapi.json', (c) => c.json((openapi ??= openApiDocument(services.values(), { title: config.name, version: config.version }))));

  app.get('/docs', (c) => c.html(docsPage(config.name, opts.docsScript ? '/docs/scalar.js' : SCALAR_CDN)));
  app.get('/docs/scalar.js', async (c) => {
    const body = await opts.docsScript?.();
    if (!body) throw notFound('route_not_found', 'The docs script is not bundled with this deployment.');
    return new Response(body, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=86400' } });
  });

  app.all('/v1/*', (c) => dispatch(c));

  app.notFound((c) => notFound('route_not_found', `No route ${c.req.method} ${new URL(c.req.url).pathname}.`).toResponse());
  app.onError((err, c) => {
    if (isGatewayError(err)) return err.toResponse();
    log('error', 'unhandled error', { route: new URL(c.req.url).pathname, error: String(err), stack: (err as Error).stack });
    return new GatewayError(500, 'internal_error', 'An internal error occurred.').toResponse();
  });

  async function dispatch(c: Context): Promise<Response> {
    const req = c.req.raw;
    const requestId = newRequestId();
    c.set('requestId' as never, requestId as never);
    const url = new URL(req.url);
    const [serviceId, ...rest] = url.pathname.slice('/v1/'.length).split('/');
    const actionPath = rest.join('/');
    const service = services.get(serviceId);
    if (!service) throw notFound('service_not_found', `No service '${serviceId}' is mounted here.`);
    const found = findAction(service, actionPath);
    if (!found) throw notFound('action_not_found', `The service '${serviceId}' has no action '${actionPath}'.`);
    const { action, id, restPath } = found;
    c.set('route' as never, `/v1/${serviceId}/${id}` as never);

    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (method !== action.method) {
      throw new GatewayError(405, 'method_not_allowed', `Use ${action.method} for /v1/${serviceId}/${id}.`, {
        headers: { allow: action.method },
      });
    }

    const identity = await authenticate(req, context);
    c.set('identity' as never, identity as never);
    const allowed = action.auth ?? ['user'];
    if (allowed.length > 0 && !allowed.includes(identity.kind)) {
      if (identity.kind === 'guest') throw new GatewayError(401, 'missing_credential', 'This action needs a bearer token.');
      throw new GatewayError(403, 'identity_not_allowed', `A ${identity.kind} credential cannot call this action.`);
    }
    if (identity.kind === 'user') {
      const status = await cities.get(identity.cityId);
      if (status === 'paused') throw new GatewayError(403, 'city_paused', 'This city is paused.');
      if (status !== 'active') throw new GatewayError(401, 'invalid_token', 'The city of this token no longer exists.');
    }

    const limit = action.maxBodyBytes ?? config.maxBodyBytes;
    let bodyRead: Promise<Uint8Array> | null = null;
    const rawBody = () => (bodyRead ??= readBody(req, limit));
    let raw: unknown;
    if (action.method === 'GET') raw = parseQuery(url);
    else if (action.body === 'raw') raw = parseQuery(url);
    else raw = parseJsonBody(await rawBody());

    // Seed §5.5: a city_id in the body or query that differs from the bound city → 403.
    const bound = boundCity(identity);
    const claimed = cityIdOf(raw) ?? url.searchParams.get('city_id');
    if (bound && claimed != null && claimed !== bound) {
      throw new GatewayError(403, 'city_mismatch', 'city_id does not match the city of this credential.', { param: 'city_id' });
    }
    if (typeof claimed === 'string') c.set('city' as never, claimed as never);

    const input = validate(action.input ?? z.object({}).loose(), raw);
    const result = await action.handler({
      input,
      identity,
      request: req,
      gateway: context,
      signal: req.signal,
      rawBody,
      rest: restPath,
      requestId,
      timing: (c.get('timing' as never) as RequestTiming | undefined) ?? { startedAt: performance.now(), upstreamMs: 0 },
    });
    if (result instanceof Response) return result;
    return c.json(result ?? { ok: true });
  }

  const gateway: Gateway = {
    fetch: async (req, ...rest) => app.fetch(req, ...(rest as [])),
    init,
    health,
    async runJob(msg) {
      await init();
      const handler = services.get(msg.service)?.jobs?.[msg.type];
      if (!handler) {
        log('warn', 'job without handler dropped', { service: msg.service, type: msg.type });
        return;
      }
      await handler(msg, context);
    },
    async stop() {
      for (const s of services.values()) await s.stop?.(context);
      await Promise.allSettled([...pending]);
    },
    async idle() {
      while (pending.size > 0) await Promise.allSettled([...pending]);
    },
    context,
  };
  return gateway;
}

function findAction(service: ServiceDef, path: string): { action: AnyAction; id: string; restPath: string } | null {
  const exact = service.actions[path];
  if (exact && !path.endsWith('/*')) return { action: exact, id: path, restPath: '' };
  for (const [id, action] of Object.entries(service.actions)) {
    if (!id.endsWith('/*')) continue;
    const prefix = id.slice(0, -1);
    if (path.startsWith(prefix) && path.length > prefix.length) return { action, id, restPath: path.slice(prefix.length) };
  }
  return null;
}

function cityIdOf(raw: unknown): string | null {
  if (raw && typeof raw === 'object' && !Array.isArray(raw) && 'city_id' in raw) {
    const v = (raw as { city_id: unknown }).city_id;
    if (typeof v === 'string') return v;
  }
  return null;
}

/** Without a runtime queue, jobs run in the background of the same process (not durable). */
function inlineQueue(gateway: () => Gateway): JobQueue {
  return {
    async enqueue(msg, o) {
      const g = gateway();
      const run = async () => {
        if (o?.delayMs) await new Promise((r) => setTimeout(r, o.delayMs));
        await g.runJob(msg);
      };
      g.context.waitUntil(run());
    },
  };
}
