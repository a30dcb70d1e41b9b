// createGateway → one Web-standard fetch handler (Hono) that runs unchanged on Node and Workers.
// The HTTP side is in http/: one module per concern (request log, CORS, health, the routes
// outside /v1, admission of /v1 actions, error answers); this file wires them to the context.
import { Hono } from 'hono';
import { addSecretSource } from './redact.ts';
import { heldSecrets } from './held-secrets.ts';
import { publicUrlMissing, trustedOrigin } from './public-url.ts';
import type { Db } from '../db/database.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { migrate } from '../db/migrate.ts';
import { CityStatusCache } from './city-status.ts';
import type { GatewayConfig, GatewayContext } from './context.ts';
import { DatabaseOutage } from './database-outage.ts';
import { GatewayError, notFound } from './errors.ts';
import type { JobMessage, JobQueue } from './jobs.ts';
import { jsonLogger, type Logger } from './log.ts';
import { ADMIN_KEY_PREFIX } from './identity.ts';
import { randomToken } from './crypto.ts';
import { RuntimeEnv, type ProcessEnv } from './runtime-env.ts';
import type { ServiceDef } from './service.ts';
import type { BlobStore } from './storage.ts';
import { endOpenStreams, fetchHttp, type UpstreamHttp } from './http.ts';
import { KeyRing } from './tokens.ts';
import { UserKeys } from './user-keys.ts';
import { secretsAtRest } from './secrets-boot.ts';
import { MasterKeyError } from './secrets.ts';
import { RateLimiter } from './rate-limit.ts';
import { METERING, type MeterRecord, type MeteringSink } from './metering.ts';
import type { ConsoleAssets } from './console.ts';
import type { DirectBodyReader } from './input.ts';
import { dispatcher } from './http/admission.ts';
import { corsForBrowsers } from './http/cors.ts';
import { errorResponse } from './http/errors.ts';
import { healthRoute, probeRoutes } from './http/health.ts';
import { requestLog } from './http/request-log.ts';
import { siteRoutes } from './http/site-routes.ts';
import { pathOf } from './http/routes.ts';
import { otlpTracesUrl, propagating } from './tracing/index.ts';
import type { Tracer } from './tracing/tracer.ts';

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
  /**
   * Reads a request's body itself (Node: from the socket's request, without the copy the
   * adapter's Request.arrayBuffer() makes), at most `limit` bytes; null to leave it to the Request.
   */
  readBody?: DirectBodyReader;
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
  /** The services' periodic housekeeping (the Worker's scheduled handler calls it). */
  maintain(): Promise<void>;
  /** A drain begins (SIGTERM): /health/ready answers 503 from now on. */
  drain(): void;
  readonly draining: boolean;
  /** Ends the streams still open with their API's error event (a drain's deadline passed); how many. */
  endStreams(): number;
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
  const userKeys = new UserKeys(opts.db, { keepAlive: (p) => context.waitUntil(p), flushDelayMs: config.gracefulStop ? 500 : 0 });
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
  const outage = new DatabaseOutage(opts.db, log, { probe: config.gracefulStop });
  const tracesUrl = otlpTracesUrl(opts.processEnv);
  let tracer: Tracer | null = null;
  let loadingTracer: Promise<Tracer> | null = null;

  const context: GatewayContext = {
    db: opts.db,
    env,
    keys,
    userKeys,
    cities,
    limits,
    jobs: opts.jobs ?? inlineQueue(() => gateway),
    storage: opts.storage ?? null,
    // With tracing on, upstream calls carry their attempt's traceparent (off: not wrapped).
    http: tracesUrl ? propagating(opts.http ?? fetchHttp()) : (opts.http ?? fetchHttp()),
    log,
    config,
    services,
    provide: (name, impl) => void capabilities.set(name, name === METERING ? withTokenCounting(impl as MeteringSink) : impl),
    use: <T>(name: string) => (capabilities.get(name) ?? (name === METERING ? tokenCounter : undefined)) as T | undefined,
    waitUntil(p) {
      // one promise per piece of work (every AI call hands over its meter record here)
      const done = () => void pending.delete(tracked);
      const tracked: Promise<void> = p.then(done, (e) => {
        if (!context.databaseDown(e)) log('error', 'background work failed', { error: String(e) });
        done();
      });
      pending.add(tracked);
      opts.waitUntil?.(tracked);
    },
    publicOrigin(req) {
      const origin = trustedOrigin(env, config.publicUrlFallback ?? 'loopback-request', req);
      if (!origin) throw publicUrlMissing();
      return origin;
    },
    databaseDown(e) {
      if (!isDatabaseUnavailable(e)) return false;
      outage.noteDown(e);
      return true;
    },
  };

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
      addSecretSource(() => heldSecrets(env, opts.masterKey?.material)); // kept out of relayed upstream text
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

  let draining = false;
  const app = new Hono();
  app.use('*', requestLog(log, opts.addHeaders));
  // OpenTelemetry (OTEL_EXPORTER_OTLP_ENDPOINT): a server span per request. Off, nothing is
  // registered and the tracer is never imported.
  if (tracesUrl) {
    const load = () =>
      (loadingTracer ??= import('./tracing/otlp.ts').then((m) => m.createTracer(tracesUrl, opts.processEnv!, config.gracefulStop ? null : (p) => context.waitUntil(p), config.version)));
    app.use('*', async (c, next) => (tracer ??= await load()).server(c, next));
  }
  // Probes answer without initialization or a fresh env (they must work while the database is away).
  probeRoutes(app, { health: () => health(), draining: () => draining, outage });

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
    await env.fresh().catch((e) => {
      // The database is away: serve on with the env snapshot held (what can be served from
      // memory is), and try again in a while rather than on every request.
      if (!initialized || !isDatabaseUnavailable(e)) throw e;
      outage.noteDown(e);
      env.postpone(1000);
    });
  };
  // Ready (the common case, initialized with a fresh env snapshot, waits for nothing), then CORS
  // (browsers only). One middleware for both: each level of Hono's chain costs a promise per request.
  const corsIfBrowser = corsForBrowsers(env);
  app.use('*', (c, next) => (initialized && !env.stale() ? corsIfBrowser(c, next) : ready().then(() => corsIfBrowser(c, next))));

  const health = async () => {
    await init();
    return { ok: true, services: [...services.keys()] };
  };
  healthRoute(app, { health, draining: () => draining, outage });
  siteRoutes(app, { context, docsScript: opts.docsScript, consoleAssets: opts.consoleAssets });

  const dispatch = dispatcher({ context, outage, socketIp: opts.socketIp, addHeaders: opts.addHeaders, readBody: opts.readBody });
  app.all('/v1/*', (c) => dispatch(c));
  // Services' paths outside /v1 (ServiceDef.mounts), dispatched as their /v1/{service}/… action.
  for (const s of services.values()) {
    for (const [prefix, to] of Object.entries(s.mounts ?? {})) app.all(`${prefix}/*`, (c) => dispatch(c, `/v1/${s.id}/${to}${pathOf(c.req.url).slice(prefix.length)}`));
  }

  app.notFound((c) => notFound('route_not_found', `No route ${c.req.method} ${new URL(c.req.url).pathname}.`).toResponse());
  app.onError((err, c) => errorResponse(err, c.req.url, log, outage));

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
    async maintain() {
      await init();
      for (const s of services.values()) await s.maintain?.(context);
    },
    async stop() {
      for (const s of services.values()) await s.stop?.(context);
      await Promise.allSettled([...pending]);
      await tracer?.exporter.flush();
      outage.stop();
    },
    drain() {
      if (!draining) log('info', 'draining: readiness is false from now on');
      draining = true;
    },
    get draining() {
      return draining;
    },
    endStreams: () => endOpenStreams(),
    async idle() {
      while (pending.size > 0) await Promise.allSettled([...pending]);
    },
    context,
  };
  return gateway;
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
