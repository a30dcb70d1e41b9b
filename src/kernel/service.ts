// A service is a named group of actions. An action declares its method, the identities it
// allows and a zod schema for its input; the kernel does routing, auth, parsing and errors.
import { z } from 'zod';
import type { GatewayContext } from './context.ts';
import type { GatewayError } from './errors.ts';
import type { Identity, IdentityKind } from './identity.ts';
import type { JobMessage } from './jobs.ts';
import type { RequestLogSpec } from './request-log.ts';
import type { RequestTrace } from './tracing/index.ts';

export interface EnvRequirement {
  key: string;
  description: string;
  required: boolean;
}

export interface ActionContext<I> {
  input: I;
  identity: Identity;
  request: Request;
  gateway: GatewayContext;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** For `body: 'raw'` actions: the request body, read once within the size limit. */
  rawBody(): Promise<Uint8Array>;
  /** For actions whose id ends in `/*`: the rest of the path after the prefix. */
  rest: string;
  /** This request's id (also sent back as `x-request-id`). */
  requestId: string;
  /** Add upstream waits to `upstreamMs`: the kernel reports the rest as `x-citygate-overhead-ms`. */
  timing: RequestTiming;
}

export interface RequestTiming {
  /** performance.now() when the request arrived. */
  startedAt: number;
  upstreamMs: number;
  /** Response headers a service adds to whatever the action answers (e.g. a plan's remaining credits). */
  headers?: Record<string, string>;
  /** Set by the kernel once the response is ready: the x-citygate-overhead-ms it reports. */
  overheadMs?: number;
  /**
   * Present until the response is ready: work that needs its overheadMs (a usage record of a
   * call answered whole). The kernel runs it right after it sets overheadMs, before the answer
   * is sent, so the record holds exactly the figure its response reports.
   */
  whenReady?: (() => void)[];
  /** The request's trace when OpenTelemetry tracing is on (kernel/tracing/); absent otherwise. */
  trace?: RequestTrace;
}

export interface ActionDef<S extends z.ZodType = z.ZodType, R = unknown, O extends z.ZodType = z.ZodType> {
  method: 'GET' | 'POST';
  /** Methods it answers besides `method` (a wildcard route that reads and calls, e.g. Google's models/{model}). */
  methods?: ('GET' | 'POST')[];
  /** Identities allowed to call; default ['user']; [] allows anyone, guests included. */
  auth?: IdentityKind[];
  /** Input schema: the query string for GET, the JSON body for POST. */
  input?: S;
  /** 'raw' leaves the body unparsed (multipart uploads, signed webhooks). */
  body?: 'json' | 'raw';
  maxBodyBytes?: number;
  /** Counted per client IP against RATE_LIMIT_GUEST_RPM (login, OAuth, checkout; never webhooks). */
  ipLimited?: boolean;
  summary?: string;
  description?: string;
  /** Response schema: documents the JSON answer in /openapi.json and types it for the client
   *  (needed when the handler answers a `Response`). Not enforced at run time. */
  output?: O;
  /** Media types of a success answer that is not (only) JSON: audio, an event stream, a page. */
  produces?: string[];
  /** For `body: 'raw'` actions: the JSON body they also accept (the API reference only). */
  bodySchema?: z.ZodType;
  /** Error statuses beyond the common ones (400, 401/403, 404, 405, 413), for the reference. */
  errors?: number[];
  /** A header that may carry the bearer credential instead of Authorization (e.g. `x-api-key`
   *  for clients of APIs that authenticate that way); a list: the first one the request has. */
  credentialHeader?: string | string[];
  /** A query parameter that may carry the credential when no header does (Google's `?key=`).
   *  Request logs redact it with every credential-named parameter; nothing else logs a query. */
  credentialQuery?: string;
  /** The action calls a model: its calls go to the request log when REQUEST_LOG (or the city's setting) is on. */
  requestLog?: RequestLogSpec;
  /** Writes this action's errors in another API's error shape (same status codes). */
  formatError?(e: GatewayError): Response;
  handler(ctx: ActionContext<z.output<S>>): Promise<R | Response> | R | Response;
}

export type AnyAction = ActionDef<any, any>;

export interface ServiceDef {
  id: string;
  name: string;
  description?: string;
  env?: EnvRequirement[];
  actions: Record<string, AnyAction>;
  /**
   * Paths outside /v1/{service} that a client with a fixed layout calls (Google's `/v1beta/…`):
   * path prefix → action prefix, e.g. `{'/v1beta': 'v1beta'}` serves /v1beta/x as action `v1beta/x`.
   * A prefix of one segment under /v1 (`{'/v1/responses': 'responses'}`, for clients that append
   * OpenAI's paths to a base URL of /v1) is served when no service has that segment as its id.
   */
  mounts?: Record<string, string>;
  /** Runs once at boot, after migrations (register capabilities, warm caches, warn). */
  init?(gw: GatewayContext): Promise<void> | void;
  /** Runs on graceful shutdown (flush buffers). */
  stop?(gw: GatewayContext): Promise<void> | void;
  /**
   * Periodic housekeeping off the request path (e.g. retention). The Worker's scheduled
   * handler (a cron trigger) calls it; a long-lived process runs its own timer from init.
   */
  maintain?(gw: GatewayContext): Promise<void>;
  /** Background job handlers by job type. */
  jobs?: Record<string, (msg: JobMessage, gw: GatewayContext) => Promise<void>>;
}

/** Types an action so its handler sees the parsed input. */
export function action<S extends z.ZodType = z.ZodObject<{}>, R = unknown, O extends z.ZodType = z.ZodType>(def: ActionDef<S, R, O>): ActionDef<S, R, O> {
  return def;
}

export function defineService<T extends ServiceDef>(def: T): T {
  return def;
}

/** Query-string booleans: "true"/"1" → true, "false"/"0" → false. */
export const queryBool = z
  .union([z.boolean(), z.enum(['true', 'false', '1', '0'])])
  .transform((v) => v === true || v === 'true' || v === '1');

/** A page cursor and limit, shared by every list action. */
export const pageQuery = {
  cursor: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
};
