// What an endpoint was sent: its messages newest first, each with its attempts, and redelivery.
import { z } from 'zod';
import { badRequest, notFound } from '../../kernel/errors.ts';
import { action, pageQuery } from '../../kernel/service.ts';
import { bodyOf } from './deliver.ts';
import { endpointFor } from './scope.ts';
import type { MessageRow } from './store.ts';

const iso = (n: number | null) => (n === null ? null : new Date(Number(n)).toISOString());

const attemptSchema = z.object({ status: z.number().int().nullable(), error: z.string().nullable(), latency_ms: z.number().int(), response: z.string().nullable(), created_at: z.iso.datetime() });
const deliverySchema = z.object({
  event_id: z.string(),
  endpoint_id: z.string(),
  type: z.string(),
  user_id: z.string().nullable(),
  status: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.number().int(),
  last_status: z.number().int().nullable(),
  next_attempt_at: z.iso.datetime().nullable(),
  delivered_at: z.iso.datetime().nullable(),
  created_at: z.iso.datetime(),
  payload: z.string().describe('the body sent, byte for byte'),
  attempt_log: z.array(attemptSchema).describe('the last 10 attempts, newest first'),
});

const idSchema = z.string().min(1).max(100);

export const deliveryActions = {
  deliveries: action({
    method: 'GET',
    auth: ['admin', 'bureau'],
    summary: "An endpoint's deliveries, newest first, with their attempts (status, latency, first bytes)",
    input: z.object({ endpoint_id: idSchema, status: z.enum(['pending', 'delivered', 'failed']).optional(), ...pageQuery }),
    output: z.object({ items: z.array(deliverySchema), next_cursor: z.string().nullable() }),
    handler: async ({ gateway, identity, input }) => {
      const ep = await endpointFor(gateway, identity, input.endpoint_id);
      const db = gateway.db.kysely;
      let q = db.selectFrom('webhook_messages').selectAll().where('endpoint_id', '=', ep.endpoint_id);
      if (input.status) q = q.where('status', '=', input.status);
      if (input.cursor !== undefined) {
        if (!/^\d{1,15}$/.test(input.cursor)) throw badRequest('invalid_cursor', 'cursor is not one this API returned.', 'cursor');
        q = q.where('seq', '<', Number(input.cursor));
      }
      const rows = await q.orderBy('seq', 'desc').limit(input.limit + 1).execute();
      const page = rows.slice(0, input.limit);
      const attempts = page.length
        ? await db.selectFrom('webhook_attempts').selectAll().where('message_seq', 'in', page.map((r) => r.seq)).orderBy('created_at', 'desc').execute()
        : [];
      return {
        items: page.map((m) => toDelivery(m, attempts.filter((a) => Number(a.message_seq) === Number(m.seq)).slice(0, 10))),
        next_cursor: rows.length > input.limit ? String(page[page.length - 1].seq) : null,
      };
    },
  }),
  redeliver: action({
    method: 'POST',
    auth: ['admin', 'bureau'],
    summary: 'Send an event to an endpoint again (the same webhook-id and body)',
    input: z.object({ endpoint_id: idSchema, event_id: idSchema }),
    output: deliverySchema,
    handler: async ({ gateway, identity, input }) => {
      const ep = await endpointFor(gateway, identity, input.endpoint_id);
      const db = gateway.db.kysely;
      const at = Date.now();
      const res = await db
        .updateTable('webhook_messages')
        .set({ status: 'pending', next_at: at, locked_until: null })
        .where('endpoint_id', '=', ep.endpoint_id)
        .where('event_id', '=', input.event_id)
        .executeTakeFirst();
      if (Number(res.numUpdatedRows) !== 1) throw notFound('delivery_not_found', `No event '${input.event_id}' for this endpoint.`, 'event_id');
      await gateway.jobs.enqueue({ service: 'webhooks', type: 'deliver', id: ep.endpoint_id });
      const m = (await db.selectFrom('webhook_messages').selectAll().where('endpoint_id', '=', ep.endpoint_id).where('event_id', '=', input.event_id).executeTakeFirst())!;
      return toDelivery(m, []);
    },
  }),
};

function toDelivery(m: MessageRow, attempts: { status: number | null; error: string | null; latency_ms: number; response: string | null; created_at: number }[]) {
  return {
    event_id: m.event_id,
    endpoint_id: m.endpoint_id,
    type: m.type,
    user_id: m.user_id,
    status: m.status,
    attempts: Number(m.attempts),
    last_status: m.last_status === null ? null : Number(m.last_status),
    next_attempt_at: m.status === 'pending' ? iso(m.next_at) : null,
    delivered_at: iso(m.delivered_at),
    created_at: iso(m.created_at)!,
    payload: bodyOf(m),
    attempt_log: attempts.map((a) => ({ status: a.status === null ? null : Number(a.status), error: a.error, latency_ms: Number(a.latency_ms), response: a.response, created_at: iso(a.created_at)! })),
  };
}
