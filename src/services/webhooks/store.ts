// The webhooks service's queries: endpoints (their secrets sealed at rest), messages, attempts,
// alert thresholds.
import type { Selectable } from 'kysely';
import type { WebhookEndpointsTable, WebhookMessagesTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { isSealed } from '../../kernel/secrets.ts';

export type EndpointRow = Selectable<WebhookEndpointsTable>;
export type MessageRow = Selectable<WebhookMessagesTable>;

/** The additional data a secret is sealed with: its row, so a sealed secret cannot move to another endpoint. */
const label = (endpointId: string) => `webhook_endpoints:${endpointId}`;

export async function sealSecret(gw: GatewayContext, endpointId: string, secret: string): Promise<string> {
  const box = gw.env.secrets;
  return box ? box.seal(secret, label(endpointId)) : secret;
}

const opened = new Map<string, string>();

export async function openSecret(gw: GatewayContext, ep: Pick<EndpointRow, 'endpoint_id' | 'secret'>): Promise<string> {
  if (!isSealed(ep.secret)) return ep.secret;
  const k = `${ep.endpoint_id}:${ep.secret}`;
  const hit = opened.get(k);
  if (hit !== undefined) return hit;
  const box = gw.env.secrets;
  if (!box) throw new Error('webhook secret is sealed but no master key is configured');
  const plain = await box.open(ep.secret, label(ep.endpoint_id));
  if (opened.size > 10_000) opened.clear();
  opened.set(k, plain);
  return plain;
}

export function getEndpoint(gw: GatewayContext, endpointId: string): Promise<EndpointRow | undefined> {
  return gw.db.kysely.selectFrom('webhook_endpoints').selectAll().where('endpoint_id', '=', endpointId).executeTakeFirst();
}

export function listEndpoints(gw: GatewayContext, cityId: string | undefined): Promise<EndpointRow[]> {
  let q = gw.db.kysely.selectFrom('webhook_endpoints').selectAll();
  if (cityId !== undefined) q = q.where('city_id', '=', cityId);
  return q.orderBy('created_at').orderBy('endpoint_id').execute();
}

/** Endpoints with messages due now (the dispatcher's question). */
export async function dueEndpoints(gw: GatewayContext, now = Date.now()): Promise<string[]> {
  const rows = await gw.db.kysely
    .selectFrom('webhook_messages')
    .select('endpoint_id')
    .distinct()
    .where('status', '=', 'pending')
    .where('next_at', '<=', now)
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
    .limit(500)
    .execute();
  return rows.map((r) => r.endpoint_id);
}
