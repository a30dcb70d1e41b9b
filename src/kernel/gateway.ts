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
import { randomToken, requestId as newRequestId, safeEqual } from './crypto.ts';
import { metrics } from './metrics.ts';
import { RuntimeEnv, type ProcessEnv } from './runtime-env.ts';
import type { AnyAction, RequestTiming, ServiceDef } from './service.ts';
import type { BlobStore } from './storage.ts';
import { fetchHttp, type UpstreamHttp } from './http.ts';
import { KeyRing } from './tokens.ts';
import { secretsAtRest } from './secrets-boot.ts';
import { MasterKeyError } from './secrets.ts';
import { RateLimiter, type Admission } from './rate-limit.ts';
import { METERING, type MeterRecord, type MeteringSink } from './metering.ts';
import { openApiDocument } from './openapi.ts';
import { SCALAR_CDN, docsPage } from './docs.ts';
import { serveConsole, type ConsoleAssets } from './console.ts';

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
  /**
   * The master key that seals secrets at rest (CITYGATE_MASTER_KEY or its generated file) and
   * where it came from (for the boot error). Without one, secrets are stored in clear.
   */
  masterKey?: { material: string; source: string } | null;
  /** The address of the connection's peer (Node: the socket; Workers: CF-Connecting-IP). */
  socketIp?: (req: Request, platform: unknown) => string | null | undefined;
  /** The admin console's built files for /console (Node: console/dist; Workers: static assets). */
  consoleAssets?: ConsoleAssets;
  /**
   * Adds headers to the response about to be written, kept by the runtime (Node: merged into the
   * head it writes), so the Response's headers need not be built into a Headers object just for
   * a few more. A Response's own header of the same name wins. False when it cannot (then they
   * are set on the Response).
   */
  addHeaders?: (platform: unknown, headers: Record<string, string>) => boolean;
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
  const limits = new RateLimiter(opts.db, env, cities, { writeThrough: !config.gracefulStop, keepAlive: (p) => context.waitUntil(p) });
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
    limits,
    jobs: opts.jobs ?? inlineQueue(() => gateway),
    storage: opts.storage ?? null,
    http: opts.http ?? fetchHttp(),
    log,
    config,
    services,
    provide: (name, impl) => void capabilities.set(name, name === METERING ? withTokenCounting(impl as MeteringSink) : impl),
    use: <T>(name: string) => (capabilities.get(name) ?? (name === METERING ? tokenCounter : undefined)) as T | undefined,
    waitUntil(p) {
      // one promise per piece of work (every AI call hands over its meter record here)
      const done = () => void pending.delete(tracked);
      const tracked: Promise<void> = p.then(done, (e) => {
        log('error', 'background work failed', { error: String(e) });
        done();
      });
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

  const FIXED_ROUTES = new Set(['/', '/health', '/metrics', '/.well-known/jwks.json', '/openapi.json', '/docs', '/docs/scalar.js', '/v1/services']);
  // Meter records also feed the token limits (tokens actually used), whether or not a usage
  // service is mounted to keep them: its sink is wrapped (everything else it offers, as is).
  const countTokens = (r: MeterRecord) => {
    const written = r.identity === 'user' && (r.input_tokens || r.output_tokens) ? limits.countTokens(r) : null;
    if (written) context.waitUntil(written);
  };
  const tokenCounter: MeteringSink = { record: countTokens };
  const withTokenCounting = (sink: MeteringSink): MeteringSink => {
    // built once: every AI call reads `record`
    const record = (r: MeterRecord) => (countTokens(r), sink.record(r));
    return new Proxy(sink, {
      get(target, prop) {
        if (prop === 'record') return record;
        const v = Reflect.get(target, prop, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  };

  let initPromise: Promise<InitResult> | null = null;
  let initialized = false;
  const init = () =>
    (initPromise ??= (async () => {
      await migrate(opts.db);
      await secretsAtRest(opts.db, env, opts.masterKey ?? null, log);
      const proposed = (opts.processEnv ?? {}).GATEWAY_ADMIN_SECRET_KEY || `${ADMIN_KEY_PREFIX}${randomToken(32)}`;
      const admin = await env.setIfAbsent('GATEWAY_ADMIN_SECRET_KEY', proposed);
      await keys.ensure();
      await env.refresh();
      for (const s of services.values()) await s.init?.(context);
      const generated = admin.inserted && !(opts.processEnv ?? {}).GATEWAY_ADMIN_SECRET_KEY ? admin.value : null;
      initialized = true;
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
    timing.overheadMs = overhead; // a stream's usage record, written after its last chunk, reports this
    const requestId = c.get('requestId' as never) as string | undefined;
    const extra: Record<string, string> = { 'x-citygate-overhead-ms': overhead.toFixed(2) };
    if (requestId) extra['x-request-id'] = requestId;
    if (!opts.addHeaders?.(c.env, extra)) {
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
  });

  // Before CORS: a preflight answered by the CORS middleware must see a fresh env too
  // (CORS_ORIGINS changed by another process), not a snapshot only other requests refresh.
  const ready = async () => {
    await init().catch((e) => {
      // A Worker cannot refuse to start: it refuses every request instead, changing nothing.
      if (e instanceof MasterKeyError) {
        log('error', 'refusing to serve: wrong master key', { error: e.message });
        throw new GatewayError(503, 'master_key_mismatch', `The gateway refuses to start: ${e.message}`);
      }
      throw e;
    });
    await env.fresh();
  };
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
  // Ready (the common case, initialized with a fresh env snapshot, waits for nothing), then CORS:
  // only browsers need it, and they always send Origin, so other callers skip that middleware
  // (it touches c.res before the handler, which makes Hono copy every response). One middleware
  // for both: each level of Hono's chain costs a promise per request.
  const corsIfBrowser = (c: Context, next: () => Promise<void>) => (c.req.header('origin') ? corsMiddleware(c, next) : next());
  app.use('*', (c, next) => (initialized && !env.stale() ? corsIfBrowser(c, next) : ready().then(() => corsIfBrowser(c, next))));

  app.get('/', (c) =>
    c.json({ name: config.name, version: config.version, ok: true, health: '/health', docs: '/docs' }),
  );

  const health = async () => {
    await init();
    return { ok: true, services: [...services.keys()] };
  };
  app.get('/health', async (c) => c.json(await health()));

  // Prometheus text: the admin key, or METRICS_TOKEN as a bearer token (for a scraper that
  // should hold nothing more). 501 where the runtime keeps no metrics (Workers).
  app.get('/metrics', async (c) => {
    const bearer = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1]?.trim();
    const token = env.get('METRICS_TOKEN');
    if (!(token && bearer && (await safeEqual(bearer, token)))) {
      const identity = await authenticate(c.req.raw, context);
      if (identity.kind === 'guest') throw new GatewayError(401, 'missing_credential', 'GET /metrics needs the admin key or METRICS_TOKEN.');
      if (identity.kind !== 'admin') throw new GatewayError(403, 'identity_not_allowed', `A ${identity.kind} credential cannot read /metrics.`);
    }
    const out = await metrics().render();
    if (!out) throw new GatewayError(501, 'metrics_not_supported', 'This runtime keeps no metrics (see docs/ai.md, Metrics).');
    return new Response(out.text, { headers: { 'content-type': out.contentType, 'cache-control': 'no-store' } });
  });

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

  app.get('/console/*', async (c) => (await serveConsole(c.req.path, opts.consoleAssets)) ?? c.notFound());
  app.get('/console', async (c) => (await serveConsole(c.req.path, opts.consoleAssets))!);

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
    const [serviceId, ...rest] = pathOf(req.url).slice('/v1/'.length).split('/');
    const actionPath = rest.join('/');
    const service = services.get(serviceId);
    if (!service) throw notFound('service_not_found', `No service '${serviceId}' is mounted here.`);
    const found = findAction(service, actionPath);
    if (!found) throw notFound('action_not_found', `The service '${serviceId}' has no action '${actionPath}'.`);
    const { action, id, restPath } = found;
    c.set('route' as never, `/v1/${serviceId}/${id}` as never);
    if (!action.formatError) return admit(c, req, serviceId, action, id, restPath);
    try {
      return await admit(c, req, serviceId, action, id, restPath);
    } catch (e) {
      if (isGatewayError(e)) return action.formatError(e);
      throw e;
    }
  }

  /** Method, identity, city status and rate limits; then the action itself (run). */
  async function admit(c: Context, req: Request, serviceId: string, action: AnyAction, id: string, restPath: string): Promise<Response> {
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (method !== action.method) {
      throw new GatewayError(405, 'method_not_allowed', `Use ${action.method} for /v1/${serviceId}/${id}.`, {
        headers: { allow: action.method },
      });
    }

    const identity = await authenticate(req, context, action.credentialHeader);
    c.set('identity' as never, identity as never);
    const allowed = action.auth ?? ['user'];
    if (allowed.length > 0 && !allowed.includes(identity.kind)) {
      if (identity.kind === 'guest') throw new GatewayError(401, 'missing_credential', 'This action needs a bearer token.');
      throw new GatewayError(403, 'identity_not_allowed', `A ${identity.kind} credential cannot call this action.`);
    }
    if (identity.kind === 'user') {
      const status = cities.peek(identity.cityId)?.status ?? (await cities.get(identity.cityId));
      if (status === 'paused') throw new GatewayError(403, 'city_paused', 'This city is paused.');
      if (status !== 'active') throw new GatewayError(401, 'invalid_token', 'The city of this token no longer exists.');
    }

    // Rate limits: 429 before the body is read; the counters' state goes out as headers.
    let admission = limits.admit(identity, method, !!action.ipLimited, () => limits.clientIp(req, opts.socketIp?.(req, c.env) ?? null));
    if (admission instanceof Promise) admission = await admission; // only when a counter needed the database
    if (!admission) return run(c, action, id, restPath, identity);
    // Kept by the runtime when it can (Node: handed over now, they go out with whatever answer
    // follows, an error's too), else set on the Response once there is one.
    const onRuntime = opts.addHeaders?.(c.env, admission.headers) === true;
    if (onRuntime && !admission.inflightKey) return run(c, action, id, restPath, identity);
    const limitHeaders = (r: Response) => (onRuntime ? r : withHeaders(r, admission.headers));
    let res: Response;
    try {
      res = await run(c, action, id, restPath, identity);
    } catch (e) {
      if (admission.inflightKey) context.waitUntil(limits.release(admission.inflightKey));
      if (isGatewayError(e)) return limitHeaders(action.formatError ? action.formatError(e) : e.toResponse());
      throw e;
    }
    return limitHeaders(admission.inflightKey ? releasedAtEnd(res, () => context.waitUntil(limits.release(admission.inflightKey!))) : res);
  }

  async function run(c: Context, action: AnyAction, id: string, restPath: string, identity: Identity): Promise<Response> {
    const req = c.req.raw;
    const requestId = c.get('requestId' as never) as string;
    const limit = action.maxBodyBytes ?? config.maxBodyBytes;
    let bodyRead: Promise<Uint8Array> | null = null;
    const rawBody = () => (bodyRead ??= readBody(req, limit));
    // The URL is parsed only when its query is read (a POST without one never builds it).
    let parsed: URL | undefined;
    const url = () => (parsed ??= new URL(req.url));
    let raw: unknown;
    if (action.method === 'GET' || action.body === 'raw') raw = parseQuery(url());
    else raw = parseJsonBody(await rawBody());

    // Seed §5.5: a city_id in the body or query that differs from the bound city → 403.
    const bound = boundCity(identity);
    const claimed = cityIdOf(raw) ?? (req.url.includes('?') ? url().searchParams.get('city_id') : null);
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

/** Adds headers to a response (a copy when its headers are immutable). */
function withHeaders(res: Response, headers: Record<string, string>): Response {
  try {
    for (const k in headers) res.headers.set(k, headers[k]);
    return res;
  } catch {
    const copy = new Response(res.body, res);
    for (const k in headers) copy.headers.set(k, headers[k]);
    return copy;
  }
}

/** Calls `done` once the response body has been fully sent (or abandoned). */
function releasedAtEnd(res: Response, done: () => void): Response {
  if (!res.body) {
    done();
    return res;
  }
  let called = false;
  const once = () => {
    if (!called) {
      called = true;
      done();
    }
  };
  const body = res.body.pipeThrough(new TransformStream({ flush: once }));
  const reader = body.getReader();
  const stream = new ReadableStream({
    async pull(ctrl) {
      const { done: end, value } = await reader.read();
      if (end) ctrl.close();
      else ctrl.enqueue(value);
    },
    cancel(reason) {
      once();
      return reader.cancel(reason);
    },
  });
  return new Response(stream, res);
}

/**
 * The path of a request's URL, as URL.pathname gives it, without building a URL object: the
 * runtimes hand over URLs already normalized (dot segments resolved, characters escaped).
 */
function pathOf(href: string): string {
  const start = href.indexOf('/', href.indexOf('//') + 2);
  if (start < 0) return '/';
  let end = href.indexOf('?', start);
  if (end < 0) end = href.length;
  const hash = href.indexOf('#', start);
  return href.slice(start, hash >= 0 && hash < end ? hash : end);
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
