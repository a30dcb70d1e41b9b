// Who starts deliveries. An event's batch only writes rows; a dispatcher then enqueues one
// 'deliver' job per endpoint with due messages. On Node every process polls (WEBHOOK_POLL_MS,
// one indexed query) so an event written just before a SIGKILL goes out after the restart, and
// a retry's time is found without a timer per message; with many replicas the job queue's
// lease keeps one runner per endpoint. On Workers a 'dispatch' job is queued after changes
// that write events (dispatchSoon) and at each isolate's start; a deliver job waiting for a
// retry is re-sent by the queue with its delay.
import type { GatewayContext } from '../../kernel/context.ts';
import { dueEndpoints } from './store.ts';

const pruned = new WeakMap<GatewayContext, number>();

/**
 * Delivered and given-up messages and their attempts are kept WEBHOOK_RETENTION_DAYS (30) for
 * the deliveries list and redelivery, then deleted (at most hourly per process).
 */
async function prune(gw: GatewayContext, now: number): Promise<void> {
  if (now - (pruned.get(gw) ?? 0) < 3_600_000) return;
  pruned.set(gw, now);
  const v = Number(gw.env.get('WEBHOOK_RETENTION_DAYS'));
  const cutoff = now - (Number.isFinite(v) && v > 0 ? v : 30) * 86_400_000;
  await gw.db.batch([
    gw.db.kysely.deleteFrom('webhook_attempts').where('created_at', '<', cutoff),
    gw.db.kysely.deleteFrom('webhook_messages').where('status', '<>', 'pending').where('created_at', '<', cutoff),
  ]);
}

/** Enqueues a deliver job for each endpoint with due messages. */
export async function dispatchDue(gw: GatewayContext): Promise<number> {
  await prune(gw, Date.now());
  const ids = await dueEndpoints(gw);
  for (const id of ids) await gw.jobs.enqueue({ service: 'webhooks', type: 'deliver', id });
  return ids.length;
}

/**
 * After a change that may have written events, where no poller runs (Workers): a dispatch job
 * on the queue. Not throttled: a skipped one could leave an event waiting for the next change.
 */
export async function dispatchSoon(gw: GatewayContext): Promise<void> {
  if (pollers.has(gw)) return; // Node: the poller finds them
  try {
    await gw.jobs.enqueue({ service: 'webhooks', type: 'dispatch', id: 'due' });
  } catch (e) {
    if (!gw.databaseDown(e)) gw.log('warn', 'webhooks: could not queue a dispatch', { error: String(e) });
  }
}

const pollers = new Map<GatewayContext, ReturnType<typeof setTimeout>>();

export function startPoller(gw: GatewayContext): void {
  const v = Number(gw.env.get('WEBHOOK_POLL_MS'));
  const every = Number.isFinite(v) && v >= 10 ? v : 1000;
  const tick = () => {
    void dispatchDue(gw)
      .catch((e) => {
        if (!gw.databaseDown(e)) gw.log('warn', 'webhooks: dispatch failed', { error: String(e) });
      })
      .finally(() => {
        if (!pollers.has(gw)) return;
        const t = setTimeout(tick, every);
        t.unref?.();
        pollers.set(gw, t);
      });
  };
  const t = setTimeout(tick, 0);
  t.unref?.();
  pollers.set(gw, t);
}

export function stopPoller(gw: GatewayContext): void {
  const t = pollers.get(gw);
  if (t) clearTimeout(t);
  pollers.delete(gw);
}
