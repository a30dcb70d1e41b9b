// usage/request-log: one call's log, found by its request id or its usage record's id, for the
// admin and for the bureau of the call's city (any other caller: 404, as if there were none).
import { z } from 'zod';
import type { GatewayContext } from '../../../kernel/context.ts';
import { badRequest, notFound } from '../../../kernel/errors.ts';
import { boundCity, type Identity } from '../../../kernel/identity.ts';

const side = z
  .object({
    headers: z.record(z.string(), z.string()).describe('credential headers are [redacted] whole; secrets in the others too'),
    content_type: z.string().nullable(),
    bytes: z.number().int(),
    body: z.unknown().optional().describe('full mode: the JSON (parsed) or text, redacted, at most 64 KiB; a stream as its assembled answer'),
    truncated: z.boolean().optional(),
    omitted: z.string().optional().describe("'binary': not text, kept by size only"),
    assembled: z.boolean().optional(),
  })
  .loose();

/** The answer of usage/request-log (the API reference). */
export const requestLogOutput = z.object({
  log_id: z.string(),
  request_id: z.string(),
  usage_id: z.string().nullable(),
  city_id: z.string().nullable(),
  user_id: z.string().nullable(),
  identity: z.string(),
  mode: z.enum(['metadata', 'full']),
  route: z.string(),
  model: z.string().nullable(),
  upstream: z.string().nullable(),
  attempts: z.number().nullable(),
  status: z.number().int(),
  created_at: z.iso.datetime(),
  truncated: z.boolean(),
  bodies: z.enum(['stored', 'none', 'missing']).describe("'none': a metadata log; 'missing': the bodies' blob is gone"),
  request: side.extend({ method: z.string(), path: z.string() }),
  response: side.extend({ status: z.number().int(), stream: z.boolean(), events: z.number().int().optional(), ended: z.enum(['ok', 'aborted', 'error']) }),
  timings: z.object({ received_at: z.string(), head_ms: z.number(), end_ms: z.number() }),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
});

const missing = () => notFound('request_log_not_found', 'No request log for this call: logging was off for it (REQUEST_LOG, or its city’s request_log), or it has expired (REQUEST_LOG_RETENTION_DAYS).');

export type RequestLogView = z.output<typeof requestLogOutput>;

export async function readRequestLog(gw: GatewayContext, identity: Identity, input: { request_id?: string; usage_id?: string }): Promise<RequestLogView> {
  const k = gw.db.kysely;
  const bound = boundCity(identity);
  let requestId = input.request_id;
  if (input.usage_id) {
    let q = k.selectFrom('usage').select(['request_id']).where('usage_id', '=', input.usage_id);
    if (bound) q = q.where('city_id', '=', bound);
    const u = await q.executeTakeFirst();
    if (!u) throw missing();
    if (requestId && requestId !== u.request_id) throw badRequest('request_mismatch', 'usage_id belongs to another request_id.', 'request_id');
    requestId = u.request_id;
  }
  if (!requestId) throw badRequest('missing_request', 'Give request_id or usage_id.', 'request_id');
  let q = k.selectFrom('request_logs').selectAll().where('request_id', '=', requestId);
  if (bound) q = q.where('city_id', '=', bound); // another city's log is not there for this bureau
  const row = await q.orderBy('created_at', 'desc').executeTakeFirst();
  if (!row) throw missing();
  type Side = z.output<typeof side>;
  const meta = JSON.parse(row.meta) as Pick<RequestLogView, 'timings'> & { method: string; path: string; request: Side; response: RequestLogView['response']; error?: RequestLogView['error'] };
  let bodies: { request?: Partial<Side>; response?: Partial<Side> } | null = null;
  let stored: 'none' | 'stored' | 'missing' = 'none';
  if (row.blob_key) {
    const obj = gw.storage ? await gw.storage.get(row.blob_key) : null;
    if (obj) {
      const bytes = obj.body instanceof Uint8Array ? obj.body : new Uint8Array(await new Response(obj.body as ReadableStream).arrayBuffer());
      bodies = JSON.parse(new TextDecoder().decode(bytes));
      stored = 'stored';
    } else stored = 'missing';
  }
  const usage = await k.selectFrom('usage').select(['usage_id', 'upstream', 'attempts', 'model']).where('request_id', '=', row.request_id).executeTakeFirst();
  return {
    log_id: row.log_id,
    request_id: row.request_id,
    usage_id: usage?.usage_id ?? null,
    city_id: row.city_id,
    user_id: row.user_id,
    identity: row.identity,
    mode: row.mode as 'metadata' | 'full',
    route: row.route,
    model: usage?.model ?? row.model,
    upstream: usage?.upstream ?? null,
    attempts: usage?.attempts ?? null,
    status: row.status,
    created_at: new Date(row.created_at).toISOString(),
    truncated: row.truncated === 1,
    /** 'stored': the bodies are below; 'none': a metadata log; 'missing': their blob is gone. */
    bodies: stored,
    request: { method: meta.method, path: meta.path, ...meta.request, ...(bodies?.request ?? {}) },
    response: { ...meta.response, ...(bodies?.response ?? {}) },
    timings: meta.timings,
    error: meta.error ?? null,
  };
}
