// Webhook events of plans: subscription.* in the batch of the change they report, and
// plan.window_exhausted once per window and exhaustion (a mark keeps when the window frees; a
// later refusal writes again only after that moment).
import { sql } from 'kysely';
import type { GatewayContext } from '../../kernel/context.ts';
import type { WindowRefusal } from '../../kernel/windows.ts';
import { dispatchSoon } from '../webhooks/dispatch.ts';
import { eventStatement, newEventId } from '../webhooks/events.ts';
import type { LiveSub } from './subscriptions.ts';

/** In memory: windows already reported by this process, until they free. */
const reported = new Map<string, number>();

export function windowExhausted(gw: GatewayContext, sub: LiveSub, r: WindowRefusal): void {
  const now = Date.now();
  const key = `${sub.scope}\n${r.window.name}`;
  if ((reported.get(key) ?? 0) > now) return;
  const until = r.window.resets_at ?? sub.period?.end ?? now + 60_000;
  reported.set(key, until);
  if (reported.size > 10_000) reported.clear();
  const db = gw.db;
  const id = newEventId();
  const kind = `plan.window_exhausted:${sub.row.subscription_id}:${r.window.name}`;
  const write = db
    .batch([
      sql`INSERT INTO webhook_marks (kind, city_id, user_id, mark, created_at)
        VALUES (${kind}, ${sub.row.city_id}, ${sub.row.user_id}, ${id}, ${until})
        ON CONFLICT (kind, city_id, user_id) DO UPDATE SET mark = excluded.mark, created_at = excluded.created_at
        WHERE webhook_marks.created_at <= ${now}`.compile(db.kysely),
      eventStatement(db, {
        id,
        type: 'plan.window_exhausted',
        cityId: sub.row.city_id,
        userId: sub.row.user_id,
        data: { subscription_id: sub.row.subscription_id, plan_id: sub.plan.id, window: r.window.name, limit: r.window.limit, used: r.window.used, resets_at: r.window.resets_at === null ? null : new Date(r.window.resets_at).toISOString() },
        at: now,
        when: sql`EXISTS (SELECT 1 FROM webhook_marks WHERE mark = ${id})`,
      }),
    ])
    .then(() => dispatchSoon(gw))
    .catch((e) => gw.log('warn', 'plans: writing plan.window_exhausted failed', { error: String(e) }));
  gw.waitUntil(write);
}
