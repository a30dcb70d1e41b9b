// /v1/{service}/{action}: find the action, admit the caller (method, identity, city status,
// rate limits), read and validate the input, run the handler.
import type { Context } from 'hono';
import { z } from 'zod';
import { authenticate } from '../authenticate.ts';
import type { GatewayContext } from '../context.ts';
import type { DatabaseOutage } from '../database-outage.ts';
import { GatewayError, notFound } from '../errors.ts';
import { boundCity, type Identity } from '../identity.ts';
import { parseJsonBody, parseQuery, readBody, validate, type DirectBodyReader } from '../input.ts';
import { requestId as newRequestId } from '../crypto.ts';
import type { AnyAction, RequestTiming } from '../service.ts';
import { Capture, logModeOf } from './capture.ts';
import { knownError } from './errors.ts';
import { releasedAtEnd, withHeaders } from './responses.ts';
import { cityIdOf, findAction, pathOf } from './routes.ts';

export interface AdmissionDeps {
  context: GatewayContext;
  outage: DatabaseOutage;
  socketIp?: (req: Request, platform: unknown) => string | null | undefined;
  addHeaders?: (platform: unknown, headers: Record<string, string>) => boolean;
  readBody?: DirectBodyReader;
}

export function dispatcher(d: AdmissionDeps): (c: Context, path?: string) => Promise<Response> {
  const { context, outage } = d;
  const { services, cities, limits, config } = context;
  // services' mounts of one segment under /v1 (ServiceDef.mounts, e.g. '/v1/responses'), looked at only on a miss
  const v1Mounts = new Map<string, [to: string, service: string]>();
  for (const s of services.values()) {
    for (const [prefix, to] of Object.entries(s.mounts ?? {})) {
      const seg = /^\/v1\/([^/]+)$/.exec(prefix)?.[1];
      if (seg && !services.has(seg)) v1Mounts.set(seg, [to, s.id]);
    }
  }

  /** `path`: the /v1/{service}/{action} path a service's mount (ServiceDef.mounts) maps a request to. */
  async function dispatch(c: Context, path?: string): Promise<Response> {
    const req = c.req.raw;
    const requestId = newRequestId();
    c.set('requestId' as never, requestId as never);
    let [serviceId, ...rest] = (path ?? pathOf(req.url)).slice('/v1/'.length).split('/');
    let service = services.get(serviceId);
    if (!service && v1Mounts.has(serviceId)) {
      // a mount under /v1 (the /v1/* route comes first): /v1/<segment>/x is <service>/<to>/x
      const [to, owner] = v1Mounts.get(serviceId)!;
      rest = [to, ...rest];
      serviceId = owner;
      service = services.get(serviceId);
    }
    const actionPath = rest.join('/');
    if (!service) throw notFound('service_not_found', `No service '${serviceId}' is mounted here.`);
    const found = findAction(service, actionPath);
    if (!found) throw notFound('action_not_found', `The service '${serviceId}' has no action '${actionPath}'.`);
    const { action, id, restPath } = found;
    c.set('route' as never, (id === '' ? `/v1/${serviceId}` : `/v1/${serviceId}/${id}`) as never);
    if (!action.formatError) return admit(c, req, serviceId, action, id, restPath);
    try {
      return await admit(c, req, serviceId, action, id, restPath);
    } catch (e) {
      const known = knownError(e, outage);
      if (known) return action.formatError(known);
      throw e;
    }
  }

  /** Method, identity, city status and rate limits; then the action itself (run). */
  async function admit(c: Context, req: Request, serviceId: string, action: AnyAction, id: string, restPath: string): Promise<Response> {
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (method !== action.method && !action.methods?.includes(method as 'GET')) {
      throw new GatewayError(405, 'method_not_allowed', `Use ${action.method} for /v1/${serviceId}/${id}.`, {
        headers: { allow: action.method },
      });
    }

    const header = typeof action.credentialHeader === 'object' ? action.credentialHeader.find((h) => req.headers.has(h)) : action.credentialHeader;
    const identity = await authenticate(action.credentialQuery ? withQueryCredential(req, action.credentialQuery, header) : req, context, header);
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
      // A user API key limited to some client addresses (accounts/keys allowed_ips).
      if (identity.key?.ips && !identity.key.ips(limits.clientIp(req, d.socketIp?.(req, c.env) ?? null))) {
        throw new GatewayError(403, 'ip_not_allowed', 'This API key is not allowed from this client address.');
      }
    }

    // Rate limits: 429 before the body is read; the counters' state goes out as headers.
    let admission = limits.admit(identity, method, !!action.ipLimited, () => limits.clientIp(req, d.socketIp?.(req, c.env) ?? null));
    if (admission instanceof Promise) admission = await admission; // only when a counter needed the database
    if (!admission) return run(c, action, restPath, identity);
    // Kept by the runtime when it can (Node: handed over now, they go out with whatever answer
    // follows, an error's too), else set on the Response once there is one.
    const onRuntime = d.addHeaders?.(c.env, admission.headers) === true;
    if (onRuntime && !admission.inflightKey) return run(c, action, restPath, identity);
    const limitHeaders = (r: Response) => (onRuntime ? r : withHeaders(r, admission.headers));
    let res: Response;
    try {
      res = await run(c, action, restPath, identity);
    } catch (e) {
      if (admission.inflightKey) context.waitUntil(limits.release(admission.inflightKey));
      const known = knownError(e, outage);
      if (known) return limitHeaders(action.formatError ? action.formatError(known) : known.toResponse());
      throw e;
    }
    return limitHeaders(admission.inflightKey ? releasedAtEnd(res, () => context.waitUntil(limits.release(admission.inflightKey!))) : res);
  }

  function run(c: Context, action: AnyAction, restPath: string, identity: Identity): Promise<Response> {
    // Request logs: one mode lookup for an action that calls a model, nothing more when off
    // (not async: no extra promise on the way).
    if (!action.requestLog) return execute(c, action, restPath, identity, null);
    const mode = logModeOf(context, identity);
    if (mode === null) return execute(c, action, restPath, identity, null);
    return logged(c, action, restPath, identity, mode);
  }

  async function logged(c: Context, action: AnyAction, restPath: string, identity: Identity, pending: Promise<'metadata' | 'full' | null> | 'metadata' | 'full'): Promise<Response> {
    const mode = await pending;
    if (!mode) return execute(c, action, restPath, identity, null);
    const capture = new Capture(context, action, mode, c, identity, c.get('requestId' as never) as string, c.get('route' as never) as string);
    const result: { value?: unknown } = {};
    return capture.around(() => execute(c, action, restPath, identity, capture, result), result);
  }

  async function execute(c: Context, action: AnyAction, restPath: string, identity: Identity, capture: Capture | null, result?: { value?: unknown }): Promise<Response> {
    const req = c.req.raw;
    const requestId = c.get('requestId' as never) as string;
    const limit = action.maxBodyBytes ?? config.maxBodyBytes;
    let bodyRead: Promise<Uint8Array> | null = null;
    const rawBody = () => (bodyRead ??= readBody(req, limit, d.readBody, c.env));
    if (capture) capture.body = () => bodyRead;
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
    const answer = await action.handler({
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
    if (answer instanceof Response) return answer;
    if (result) result.value = answer ?? { ok: true };
    return c.json(answer ?? { ok: true });
  }

  return dispatch;
}

/**
 * The request as authenticate() reads it, for an action that takes its credential in the query
 * too: without a credential header, the query's goes in as a bearer token (only headers are read).
 */
function withQueryCredential(req: Request, name: string, header: string | undefined): Request {
  if (!req.url.includes('?') || req.headers.has('authorization') || (header && req.headers.has(header))) return req;
  const key = new URL(req.url).searchParams.get(name);
  return key ? new Request('http://credential.invalid/', { headers: { authorization: `Bearer ${key}` } }) : req;
}
