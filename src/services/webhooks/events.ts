// The outbox: an event is a row of webhook_messages per subscribed endpoint, written by a
// statement that the change's own batch carries, so there is no event without its change and
// no change without its event. These builders are the hooks other services add to their
// batches (payment, refunds, accounts, cities, the ledger). An event no endpoint subscribes to
// writes nothing.
import { sql, type CompiledQuery, type RawBuilder } from 'kysely';
import type { Db } from '../../db/database.ts';
import { newId } from '../../kernel/crypto.ts';

export const CITY_EVENTS = [
  'payment.succeeded',
  'payment.refunded',
  'payment.disputed',
  'balance.low',
  'budget.reached',
  'user.created',
  'city.paused',
  'city.activated',
  // plans (issue 34)
  'subscription.created',
  'subscription.renewed',
  'subscription.past_due',
  'subscription.canceled',
  'subscription.ended',
  'plan.window_exhausted',
] as const;
/** Events about the deployment, for the operator's endpoints (city '*') only. */
export const OPERATOR_EVENTS = ['upstream.circuit_opened', 'upstream.circuit_closed', 'webhook.endpoint_disabled'] as const;
export const EVENT_TYPES = [...CITY_EVENTS, ...OPERATOR_EVENTS, 'webhook.test'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The operator's endpoints' city. */
export const OPERATOR = '*';

export const newEventId = () => newId('msg', 12);

export interface EventInput {
  type: EventType;
  /** null: an operator event. */
  cityId: string | null;
  userId?: string | null;
  data: Record<string, unknown>;
  at: number;
  id?: string;
  /** Written only when this holds (e.g. the change's ledger row exists). */
  when?: RawBuilder<unknown>;
}

/** Endpoints of `city` (and the operator's) that take `type`. */
function subscribers(city: unknown, type: string, operatorOnly: boolean): RawBuilder<unknown> {
  const scope = operatorOnly ? sql`e.city_id = ${OPERATOR}` : sql`(e.city_id = ${city} OR e.city_id = ${OPERATOR})`;
  return sql`${scope} AND e.enabled = 1 AND (e.events LIKE ${`%"${type}"%`} OR e.events LIKE '%"*"%')`;
}

/** One event, as one statement of the change's batch. */
export function eventStatement(db: Db, e: EventInput): CompiledQuery {
  const id = e.id ?? newEventId();
  // Casts: PostgreSQL types an INSERT … SELECT's parameters from the SELECT alone.
  return sql`INSERT INTO webhook_messages (event_id, endpoint_id, city_id, user_id, type, data, status, attempts, next_at, created_at)
    SELECT ${id}, e.endpoint_id, ${e.cityId}, ${e.userId ?? null}, ${e.type}, ${JSON.stringify(e.data)}, 'pending', 0, CAST(${e.at} AS BIGINT), CAST(${e.at} AS BIGINT)
    FROM webhook_endpoints e
    WHERE ${subscribers(e.cityId, e.type, e.cityId === null)} AND ${e.when ?? sql`1 = 1`}`.compile(db.kysely);
}

/**
 * balance.low, once per crossing: statements every ledger movement carries (ledger.ts). A mark
 * (one row per user, its primary key) is set when the balance is below the city's threshold
 * and cleared when it is back at or above it; the event goes out only from the batch whose
 * INSERT set the mark. Concurrent movements of one balance run one at a time (a batch runs
 * alone on SQLite and D1; on PostgreSQL the movement locks the balance row and the mark's
 * primary key makes a second INSERT wait, then do nothing), so 50 calls that cross together
 * write one event.
 */
export function balanceLowStatements(db: Db, cityId: string, userId: string, at: number): CompiledQuery[] {
  const mark = newEventId();
  const below = (cmp: RawBuilder<unknown>) =>
    sql`FROM balances b JOIN webhook_alerts a ON a.city_id = b.city_id WHERE b.city_id = ${cityId} AND b.user_id = ${userId} AND a.balance_low IS NOT NULL AND ${cmp}`;
  return [
    sql`DELETE FROM webhook_marks WHERE kind = 'balance.low' AND city_id = ${cityId} AND user_id = ${userId}
      AND EXISTS (SELECT 1 ${below(sql`b.credits >= a.balance_low`)})`.compile(db.kysely),
    sql`INSERT INTO webhook_marks (kind, city_id, user_id, mark, created_at)
      SELECT 'balance.low', b.city_id, b.user_id, ${mark}, CAST(${at} AS BIGINT) ${below(sql`b.credits < a.balance_low`)}
      ON CONFLICT (kind, city_id, user_id) DO NOTHING`.compile(db.kysely),
    sql`INSERT INTO webhook_messages (event_id, endpoint_id, city_id, user_id, type, data, status, attempts, next_at, created_at)
      SELECT ${mark}, e.endpoint_id, b.city_id, b.user_id, 'balance.low',
        '{"credits":' || CAST(b.credits AS TEXT) || ',"threshold":' || CAST(a.balance_low AS TEXT) || '}', 'pending', 0, CAST(${at} AS BIGINT), CAST(${at} AS BIGINT)
      FROM webhook_marks m
      JOIN balances b ON b.city_id = m.city_id AND b.user_id = m.user_id
      JOIN webhook_alerts a ON a.city_id = m.city_id
      JOIN webhook_endpoints e ON ${subscribers(cityId, 'balance.low', false)}
      WHERE m.mark = ${mark}`.compile(db.kysely),
  ];
}

/**
 * budget.reached, once per user and budget period: the first refusal of a call because the
 * user's budget is spent (402 budget_exceeded) writes it. The mark keeps the period's start.
 */
export function budgetReachedStatements(db: Db, e: { cityId: string; userId: string; periodStart: number; at: number; data: Record<string, unknown> }): CompiledQuery[] {
  const id = newEventId();
  return [
    sql`INSERT INTO webhook_marks (kind, city_id, user_id, mark, created_at)
      VALUES ('budget.reached', ${e.cityId}, ${e.userId}, ${id}, ${e.periodStart})
      ON CONFLICT (kind, city_id, user_id) DO UPDATE SET mark = excluded.mark, created_at = excluded.created_at
      WHERE webhook_marks.created_at < excluded.created_at`.compile(db.kysely),
    eventStatement(db, {
      id,
      type: 'budget.reached',
      cityId: e.cityId,
      userId: e.userId,
      data: e.data,
      at: e.at,
      when: sql`EXISTS (SELECT 1 FROM webhook_marks WHERE mark = ${id})`,
    }),
  ];
}
