// The ledger: every movement of credits is one append-only row with a unique idempotency key,
// written in the same batch as the balance change it explains. No interactive transactions:
// a movement is a batch of plain statements whose later steps only apply if the guarded
// ledger INSERT … SELECT inserted its row (they look the row up by its fresh entry id), so the
// same statements are atomic and exact on node:sqlite and D1 (a batch runs alone there), and on
// PostgreSQL, where step 1 locks the balance row (lockRowsOf): a concurrent movement of the same
// balance waits, then reads the committed balance and checks its guard against it.
//
//   1. INSERT INTO ledger (…) SELECT …, <delta>, b.credits + <delta> FROM balances b [JOIN …]
//      WHERE b.city_id = ? AND b.user_id = ? AND <guard>         -- 0 or 1 row
//   2. UPDATE balances SET credits = credits + (that row's credits)
//      WHERE … AND EXISTS (that row)                               -- applies iff 1 did
//
// A duplicate idempotency key makes step 1 fail on the UNIQUE index and rolls the whole batch
// back; callers turn that into a replay. balances.credits has CHECK (credits >= 0), so even a
// wrong guard could never leave a negative balance: the batch would fail instead.
import { sql, type CompiledQuery, type RawBuilder, type Selectable } from 'kysely';
import { lockRowsOf, type Db } from '../../db/database.ts';
import type { LedgerTable } from '../../db/schema.ts';
import { newId } from '../../kernel/crypto.ts';
import { balanceLowStatements } from '../webhooks/events.ts';

export type LedgerKind = LedgerTable['kind'];

export interface Move {
  /** A fresh id; the batch's later statements find the row by it. */
  entryId: string;
  /** Globally unique; a second movement with the same key fails the batch (a replay). */
  key: string;
  cityId: string;
  userId: string;
  kind: LedgerKind;
  /** Signed credits, an SQL expression over `b` (the balance row) and any joined alias. */
  delta: RawBuilder<unknown>;
  /** Extra JOIN clause (e.g. the hold or the payment this movement closes). */
  join?: RawBuilder<unknown>;
  /** The condition under which the movement happens at all. */
  guard?: RawBuilder<unknown>;
  ref?: string | null;
  requestId?: string | null;
  model?: string | null;
  reason?: string | null;
  actor?: string | null;
  at: number;
}

export const newEntryId = () => newId('le', 12);

/** Step 1 and 2 of a movement (then the balance.low statements: callers index only steps 1 and 2, from the front). */
export function moveStatements(db: Db, m: Move): CompiledQuery[] {
  const d = m.delta;
  const insert = sql`INSERT INTO ledger (entry_id, idempotency_key, city_id, user_id, credits, balance_after, kind, ref, request_id, model, reason, actor, created_at)
    SELECT ${m.entryId}, ${m.key}, b.city_id, b.user_id, ${d}, b.credits + ${d}, ${m.kind}, ${m.ref ?? null}, ${m.requestId ?? null}, ${m.model ?? null}, ${m.reason ?? null}, ${m.actor ?? null}, ${m.at}
    FROM balances b ${m.join ?? sql``}
    WHERE b.city_id = ${m.cityId} AND b.user_id = ${m.userId} AND ${m.guard ?? sql`1 = 1`}
    ${lockRowsOf(db, 'b')}`;
  const apply = sql`UPDATE balances
    SET credits = credits + (SELECT l.credits FROM ledger l WHERE l.entry_id = ${m.entryId}), updated_at = ${m.at}
    WHERE city_id = ${m.cityId} AND user_id = ${m.userId} AND EXISTS (SELECT 1 FROM ledger l WHERE l.entry_id = ${m.entryId})`;
  // balance.low (webhooks): decided here, where the balance changes, once per crossing.
  return [insert.compile(db.kysely), apply.compile(db.kysely), ...balanceLowStatements(db, m.cityId, m.userId, m.at)];
}

/**
 * Opens the balance of a user if it has none yet, with the starting grant as its first ledger
 * row. Harmless when the balance exists, so every money batch starts with it.
 */
export function openStatements(db: Db, cityId: string, userId: string, grant: number, at: number): CompiledQuery[] {
  const entryId = newEntryId();
  const g = Math.max(0, Math.floor(grant));
  return [
    sql`INSERT INTO balances (city_id, user_id, credits, opened_entry, created_at, updated_at)
      VALUES (${cityId}, ${userId}, ${g}, ${entryId}, ${at}, ${at})
      ON CONFLICT (city_id, user_id) DO NOTHING`.compile(db.kysely),
    sql`INSERT INTO ledger (entry_id, idempotency_key, city_id, user_id, credits, balance_after, kind, reason, actor, created_at)
      SELECT ${entryId}, ${`grant:${cityId}:${userId}`}, b.city_id, b.user_id, b.credits, b.credits, 'grant', 'starting grant', 'system', ${at}
      FROM balances b
      WHERE b.city_id = ${cityId} AND b.user_id = ${userId} AND b.opened_entry = ${entryId} AND b.credits > 0`.compile(db.kysely),
  ];
}

/** Whether the movement starting at `moveStart` of a batch wrote a balance.low event (its last statement). */
export function lowAlertWritten(res: readonly { changes: number }[] | null, moveStart: number): boolean {
  return !!res && (res[moveStart + 4]?.changes ?? 0) > 0;
}

/** Index of the ledger INSERT of a movement inside a batch built as [...open, ...move]. */
export const OPEN_LEN = 2;

export interface LedgerEntry {
  entry_id: string;
  credits: number;
  balance_after: number;
  kind: LedgerKind;
  ref: string | null;
  request_id: string | null;
  model: string | null;
  reason: string | null;
  created_at: string;
}

export function toEntry(r: Selectable<LedgerTable>): LedgerEntry {
  return {
    entry_id: r.entry_id,
    credits: r.credits,
    balance_after: r.balance_after,
    kind: r.kind,
    ref: r.ref,
    request_id: r.request_id,
    model: r.model,
    reason: r.reason,
    created_at: new Date(r.created_at).toISOString(),
  };
}

/** Credits as US dollars (1 USD = 1,000,000 credits). */
export const usdOf = (credits: number) => credits / 1_000_000;
