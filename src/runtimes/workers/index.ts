// The Cloudflare Workers runtime: the same createGateway and services, on D1, with
// Cloudflare Queues behind the job queue, R2 behind the blob store when storage is
// declared, and waitUntil keeping background work alive after the response.
//
//   export default createWorker();                       // stock services
//   export default createWorker({ services: [...] });    // a custom selection
/// <reference path="./cloudflare-workers.d.ts" />
import { waitUntil } from 'cloudflare:workers';
import { openD1, type D1Database } from '../../db/dialects/d1.ts';
import { createGateway, type Gateway } from '../../kernel/gateway.ts';
import type { JobMessage } from '../../kernel/jobs.ts';
import { jsonLogger, type Logger } from '../../kernel/log.ts';
import type { ServiceDef } from '../../kernel/service.ts';
import type { AiConfig } from '../../services/ai/catalog/registry.ts';
import { AI_CONFIG } from '../../services/ai/state.ts';
import { selectServices, stockServices } from '../../services/index.ts';
import { readWorkerConfig, varsOf } from './config.ts';
import { CloudflareJobQueue, consumeBatch } from './queue.ts';
import { workerConsoleAssets } from './console-assets.ts';
import { R2BlobStore } from './r2.ts';
import type { ExecutionContext, MessageBatch, Queue, R2Bucket, WorkerEnv } from './types.ts';

export interface WorkerOptions {
  /** The services to mount (GATEWAY_SERVICES still selects among them). Default: the stock catalog. */
  services?: ServiceDef[];
  /** Models and provider slots the project adds to the ai registry (what citygate.config.ts holds on Node). */
  ai?: AiConfig;
  logger?: Logger;
}

export interface GatewayWorker {
  fetch(req: Request, env: WorkerEnv, ctx: ExecutionContext): Promise<Response>;
  queue(batch: MessageBatch, env: WorkerEnv, ctx: ExecutionContext): Promise<void>;
  /** Cron triggers (the deploy declares one): the services' housekeeping, e.g. usage retention. */
  scheduled(controller: unknown, env: WorkerEnv, ctx: ExecutionContext): Promise<void>;
}

function binding<T>(env: WorkerEnv, name: string, what: string): T {
  const b = env[name];
  if (!b || typeof b !== 'object') {
    throw new Error(`The Worker has no ${what} binding '${name}': check resources in city.json and redeploy.`);
  }
  return b as T;
}

/** Builds the gateway from the Worker's env (bindings and vars). */
export function gatewayFromEnv(env: WorkerEnv, opts: WorkerOptions = {}): Gateway {
  const cfg = readWorkerConfig(env);
  const db = openD1(binding<D1Database>(env, cfg.databaseBinding, 'D1 database'));
  const queue = queueOf(env);
  const bucket = cfg.storageBinding ? binding<R2Bucket>(env, cfg.storageBinding, 'R2 bucket') : null;
  const gateway = createGateway({
    db,
    services: selectServices(cfg.services, opts.services ?? stockServices),
    processEnv: varsOf(env),
    // Without a queue binding jobs run in the background of the request (not durable).
    jobs: queue ? new CloudflareJobQueue(queue) : undefined,
    storage: bucket ? new R2BlobStore(bucket, cfg.storagePublicUrl) : null,
    logger: opts.logger ?? jsonLogger(),
    // The users' page (/u/<city_id>/) reads users.html from the static assets.
    consoleAssets: workerConsoleAssets(env),
    // Background work (settling a charge, writing usage, a stream's metering after its last
    // chunk) is kept alive by the request — or queue batch — whose code started it, however
    // busy the isolate is with other requests.
    waitUntil: keepAlive,
    // A Worker never runs stop(): buffered writes (usage records) go out after each request.
    config: { localLogin: cfg.localLogin, gracefulStop: false, publicUrlFallback: 'request', ...(cfg.version ? { version: cfg.version } : {}) },
    // Secrets at rest: the Worker secret CITYGATE_MASTER_KEY (`citygate deploy` sets it once).
    // Cloudflare sets CF-Connecting-IP to the visitor's address (the socket's, for a Worker).
    socketIp: (req) => req.headers.get('cf-connecting-ip'),
    masterKey: typeof env.CITYGATE_MASTER_KEY === 'string' && env.CITYGATE_MASTER_KEY ? { material: env.CITYGATE_MASTER_KEY, source: 'the Worker secret CITYGATE_MASTER_KEY' } : null,
  });
  if (opts.ai) gateway.context.provide(AI_CONFIG, opts.ai);
  return gateway;
}

function keepAlive(p: Promise<unknown>): void {
  try {
    waitUntil(p);
  } catch {
    // Outside any request (isolate start-up): nothing to attach it to; it runs while the isolate lives.
  }
}

function queueOf(env: WorkerEnv): Queue<JobMessage> | undefined {
  const q = env[readWorkerConfig(env).queueBinding] as Queue<JobMessage> | undefined;
  return q && typeof q.send === 'function' ? q : undefined;
}

/**
 * Responses over WebSocket is served on Node only (a socket's turns outlive what a Worker
 * invocation may hold, and its drain is the Node server's). A WebSocket upgrade of the
 * Responses paths is refused at once, in the one error shape, and clients fall back to HTTP
 * (Codex does on any refused upgrade; POST /v1/ai/responses streams the same events).
 */
function refuseWebSocket(req: Request): Response | null {
  if (req.headers.get('upgrade')?.toLowerCase() !== 'websocket') return null;
  const path = new URL(req.url).pathname;
  if (path !== '/v1/responses' && path !== '/v1/ai/responses') return null;
  const error = { type: 'invalid_request_error', code: 'websocket_not_supported', message: 'Responses over WebSocket is not served on this deployment (Cloudflare Workers); use POST /v1/ai/responses with stream: true.' };
  return Response.json({ error }, { status: 405, headers: { allow: 'POST' } });
}

export function createWorker(opts: WorkerOptions = {}): GatewayWorker {
  // One gateway per isolate: its caches (env snapshot, verified tokens, city status) live
  // as long as the isolate does.
  let gateway: Gateway | null = null;
  const gatewayFor = (env: WorkerEnv) => (gateway ??= gatewayFromEnv(env, opts));

  return {
    fetch(req, env, ctx) {
      if (req.headers.get('upgrade') !== null) {
        const refused = refuseWebSocket(req);
        if (refused) return Promise.resolve(refused);
      }
      return gatewayFor(env).fetch(req, env, ctx);
    },
    async queue(batch, env) {
      await consumeBatch(gatewayFor(env), batch, queueOf(env));
    },
    async scheduled(_controller, env) {
      await gatewayFor(env).maintain();
    },
  };
}

export default createWorker();
