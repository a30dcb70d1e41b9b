// Delivery: one job per endpoint ('webhooks' / 'deliver' / endpoint id) sends its due messages
// oldest first, at least once, in order per user and event type: a message that fails holds
// back the later ones of the same user and type until it goes through or is given up.
//
//   claim:    a message is claimed with one UPDATE (a lease: WEBHOOK_TIMEOUT_MS + 5 s), so runners of many processes or
//             replicas never send it at the same time; a runner that dies mid-send leaves the
//             lease to expire and the message is sent again (the at-least-once rule: receivers
//             de-duplicate by webhook-id);
//   backoff:  WEBHOOK_RETRY_BASE_MS (5 s) × 2^(attempt−1), at most 1 h between attempts, for
//             WEBHOOK_RETRY_FOR_MS (3 days) after the event; then the message is given up
//             ('failed'), and an endpoint that has not succeeded since it began failing is
//             disabled, with a webhook.endpoint_disabled event to the operator's endpoints;
//   attempt:  every one recorded: HTTP status (or the network error), latency, first 1 KB.
// The URL goes through the outbound policy (kernel/outbound/) at every attempt; redirects are
// not followed (a 3xx is a failure).
import type { Selectable } from 'kysely';
import type { Statement } from '../../db/database.ts';
import type { WebhookEndpointsTable, WebhookMessagesTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import { RetryJob } from '../../kernel/jobs.ts';
import { checkUrl, outboundRules, UnreadableUrl } from '../../kernel/outbound/policy.ts';
import { eventStatement } from './events.ts';
import { signatureHeaders } from './sign.ts';
import { openSecret } from './store.ts';

const FIRST_BYTES = 1024;
const MAX_GAP_MS = 3_600_000;
/** A claim outlives the attempt's time limit by this much: then another runner may send it (the sender died). */
const CLAIM_MARGIN_MS = 5_000;

function num(gw: GatewayContext, key: string, dflt: number): number {
  const v = Number(gw.env.get(key));
  return gw.env.get(key) && Number.isFinite(v) && v >= 0 ? v : dflt;
}

export const retryBaseMs = (gw: GatewayContext) => num(gw, 'WEBHOOK_RETRY_BASE_MS', 5_000);
export const retryForMs = (gw: GatewayContext) => num(gw, 'WEBHOOK_RETRY_FOR_MS', 3 * 86_400_000);
const timeoutMs = (gw: GatewayContext) => num(gw, 'WEBHOOK_TIMEOUT_MS', 15_000);

/** The body a message is sent with: the same bytes at every attempt. */
export function bodyOf(m: Pick<Selectable<WebhookMessagesTable>, 'type' | 'created_at' | 'city_id' | 'user_id' | 'data'>): string {
  const data: Record<string, unknown> = {};
  if (m.city_id !== null) data.city_id = m.city_id;
  if (m.user_id !== null) data.user_id = m.user_id;
  Object.assign(data, JSON.parse(m.data));
  return JSON.stringify({ type: m.type, timestamp: new Date(Number(m.created_at)).toISOString(), data });
}

interface Outcome {
  status: number | null;
  error: string | null;
  response: string | null;
  latencyMs: number;
  ok: boolean;
}

async function firstBytes(res: Response): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  try {
    while (n < FIRST_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      n += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) (all.set(c, at), (at += c.byteLength));
  return new TextDecoder().decode(all.subarray(0, FIRST_BYTES));
}

/** One POST of a message to its endpoint. */
export async function send(gw: GatewayContext, url: string, secret: string, eventId: string, body: string): Promise<Outcome> {
  const started = performance.now();
  const done = (o: Omit<Outcome, 'latencyMs'>): Outcome => ({ ...o, latencyMs: Math.round(performance.now() - started) });
  const rules = outboundRules(gw.env);
  try {
    checkUrl(new URL(url), rules);
    const headers = { 'content-type': 'application/json', 'user-agent': 'citygate-webhooks', ...(await signatureHeaders(secret, eventId, body)) };
    const res = await gw.http.untrusted(url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs(gw)) }, rules);
    const response = await firstBytes(res).catch(() => '');
    return done({ status: res.status, error: null, response, ok: res.status >= 200 && res.status < 300 });
  } catch (e) {
    let error = 'network error';
    if (e instanceof UnreadableUrl) error = `refused: ${e.message}`;
    else if ((e as Error)?.name === 'TimeoutError') error = 'timeout';
    else for (let x: any = e, i = 0; x && i < 5; x = x.cause, i++) if (x.code === 'EOUTBOUND_REFUSED') error = 'refused: its address is not a public one';
    return done({ status: null, error, response: null, ok: false });
  }
}

/** When the next attempt goes, after `attempts` failed ones. */
export function nextAttemptAt(gw: GatewayContext, attempts: number, now: number): number {
  return now + Math.min(MAX_GAP_MS, retryBaseMs(gw) * 2 ** Math.max(0, attempts - 1));
}

/** Sends the due messages of one endpoint; asks to run again when some wait for a retry. */
export async function deliverEndpoint(gw: GatewayContext, endpointId: string): Promise<void> {
  const db = gw.db;
  const ep = await db.kysely.selectFrom('webhook_endpoints').selectAll().where('endpoint_id', '=', endpointId).executeTakeFirst();
  if (!ep || ep.enabled !== 1) return; // a disabled endpoint's messages wait for it (or a redelivery)
  const secret = await openSecret(gw, ep);
  let soonest = Infinity;
  for (let round = 0; round < 20; round++) {
    // One pass over the pending messages, oldest first, a page at a time: a key (user, type)
    // whose message cannot go now holds back its later messages for the rest of the pass.
    const held = new Set<string>();
    let sent = 0;
    for (let after = 0; ; ) {
      const rows = await db.kysely
        .selectFrom('webhook_messages')
        .selectAll()
        .where('endpoint_id', '=', endpointId)
        .where('status', '=', 'pending')
        .where('seq', '>', after)
        .orderBy('seq')
        .limit(100)
        .execute();
      if (!rows.length) break;
      after = Number(rows[rows.length - 1].seq);
      for (const m of rows) {
        const key = `${m.user_id ?? ''}\n${m.type}`;
        if (held.has(key)) continue;
        const now = Date.now();
        if (Number(m.next_at) > now || (m.locked_until !== null && Number(m.locked_until) > now)) {
          held.add(key);
          soonest = Math.min(soonest, Math.max(Number(m.next_at), Number(m.locked_until ?? 0)));
          continue;
        }
        const claimed = await db.kysely
          .updateTable('webhook_messages')
          .set({ locked_until: now + timeoutMs(gw) + CLAIM_MARGIN_MS })
          .where('seq', '=', m.seq)
          .where('status', '=', 'pending')
          .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
          .executeTakeFirst();
        if (Number(claimed.numUpdatedRows) !== 1) {
          held.add(key);
          soonest = Math.min(soonest, now + 1000);
          continue;
        }
        sent++;
        const o = await send(gw, ep.url, secret, m.event_id, bodyOf(m));
        if (!(await record(gw, ep, m, o))) {
          held.add(key);
          const fresh = await db.kysely.selectFrom('webhook_messages').select(['status', 'next_at']).where('seq', '=', m.seq).executeTakeFirst();
          if (fresh?.status === 'pending') soonest = Math.min(soonest, Number(fresh.next_at));
          const still = await db.kysely.selectFrom('webhook_endpoints').select('enabled').where('endpoint_id', '=', endpointId).executeTakeFirst();
          if (still?.enabled !== 1) return;
        }
      }
      if (rows.length < 100) break;
    }
    if (sent === 0) break;
  }
  if (soonest < Infinity) throw new RetryJob('webhook messages wait for a retry', Math.max(0, soonest - Date.now()));
}

/** Writes an attempt and its outcome; returns whether it was delivered. */
async function record(gw: GatewayContext, ep: Selectable<WebhookEndpointsTable>, m: Selectable<WebhookMessagesTable>, o: Outcome): Promise<boolean> {
  const db = gw.db;
  const at = Date.now();
  const attempts = m.attempts + 1;
  const attempt = db.kysely.insertInto('webhook_attempts').values({
    attempt_id: newId('att', 12),
    message_seq: m.seq,
    endpoint_id: ep.endpoint_id,
    event_id: m.event_id,
    status: o.status,
    error: o.error,
    latency_ms: o.latencyMs,
    response: o.response,
    created_at: at,
  });
  if (o.ok) {
    await db.batch([
      attempt,
      db.kysely.updateTable('webhook_messages').set({ status: 'delivered', attempts, last_status: o.status, delivered_at: at, locked_until: null }).where('seq', '=', m.seq),
      db.kysely.updateTable('webhook_endpoints').set({ failing_since: null }).where('endpoint_id', '=', ep.endpoint_id).where('failing_since', 'is not', null),
    ]);
    return true;
  }
  const giveUp = at - Number(m.created_at) >= retryForMs(gw);
  const failingSince = ep.failing_since ?? at;
  const statements: Statement[] = [
    attempt,
    db.kysely
      .updateTable('webhook_messages')
      .set({ status: giveUp ? 'failed' : 'pending', attempts, last_status: o.status, next_at: giveUp ? Number(m.next_at) : nextAttemptAt(gw, attempts, at), locked_until: null })
      .where('seq', '=', m.seq),
    db.kysely.updateTable('webhook_endpoints').set({ failing_since: failingSince }).where('endpoint_id', '=', ep.endpoint_id).where('failing_since', 'is', null),
  ];
  // Given up after failing all along: the endpoint is disabled, and the operator told.
  if (giveUp && at - failingSince >= retryForMs(gw)) {
    const reason = `failed every attempt for ${Math.round((at - failingSince) / 60_000)} min (last: ${o.status ?? o.error})`;
    statements.push(
      db.kysely.updateTable('webhook_endpoints').set({ enabled: 0, disabled_reason: reason, updated_at: at }).where('endpoint_id', '=', ep.endpoint_id).where('enabled', '=', 1),
      eventStatement(db, { type: 'webhook.endpoint_disabled', cityId: null, data: { endpoint_id: ep.endpoint_id, endpoint_city_id: ep.city_id, url: ep.url, reason }, at }),
    );
    gw.log('warn', 'webhooks: endpoint disabled after failing persistently', { endpoint: ep.endpoint_id, city: ep.city_id });
  }
  await db.batch(statements);
  return false;
}
