// The queries of users' API keys (table user_keys, migration 092). Every change moves
// updated_at forward (never back, even within one millisecond or against another replica's
// clock), because processes find changed keys by it (kernel/user-keys.ts).
import { sql, type Selectable } from 'kysely';
import type { Db } from '../../../db/database.ts';
import type { UserKeysTable } from '../../../db/schema.ts';

export type KeyRow = Selectable<UserKeysTable>;

/** The fields a key is made or updated with (null clears a limit). */
export interface KeyFields {
  name?: string;
  models?: string[] | null;
  budget?: { credits: number; window?: 'day' | 'week' | '30d' | null } | null;
  expires_at?: number | null;
  allowed_ips?: string[] | null;
  rpm?: number | null;
}

function columnsOf(f: KeyFields): Partial<UserKeysTable> {
  const out: Partial<UserKeysTable> = {};
  if (f.name !== undefined) out.name = f.name;
  if (f.models !== undefined) out.models = f.models === null ? null : JSON.stringify(f.models);
  if (f.budget !== undefined) {
    out.budget_credits = f.budget?.credits ?? null;
    out.budget_window = f.budget?.window ?? null;
  }
  if (f.expires_at !== undefined) out.expires_at = f.expires_at;
  if (f.allowed_ips !== undefined) out.allowed_ips = f.allowed_ips === null ? null : JSON.stringify(f.allowed_ips);
  if (f.rpm !== undefined) out.rpm = f.rpm;
  return out;
}

export async function insertKey(db: Db, a: { id: string; hash: string; cityId: string; userId: string; fields: KeyFields & { name: string } }): Promise<KeyRow> {
  const t = Date.now();
  const row: KeyRow = {
    key_id: a.id,
    city_id: a.cityId,
    user_id: a.userId,
    name: a.fields.name,
    secret_hash: a.hash,
    models: null,
    budget_credits: null,
    budget_window: null,
    expires_at: null,
    allowed_ips: null,
    rpm: null,
    status: 'active',
    revoked_at: null,
    created_at: t,
    updated_at: t,
    last_used_at: null,
    ...columnsOf(a.fields),
  };
  await db.kysely.insertInto('user_keys').values(row).execute();
  return row;
}

export async function getKey(db: Db, id: string): Promise<KeyRow | undefined> {
  return db.kysely.selectFrom('user_keys').selectAll().where('key_id', '=', id).executeTakeFirst();
}

/** updated_at for a change made now: later than the row's, whatever the clocks say. */
const bumped = (t: number) => sql<number>`CASE WHEN updated_at >= ${t} THEN updated_at + 1 ELSE ${t} END`;

export async function updateKey(db: Db, id: string, fields: KeyFields): Promise<KeyRow | undefined> {
  const t = Date.now();
  return db.kysely
    .updateTable('user_keys')
    .set({ ...columnsOf(fields), updated_at: bumped(t) })
    .where('key_id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** Revokes a key (once: a second revoke changes nothing and answers the row as it is). */
export async function revokeKey(db: Db, id: string): Promise<KeyRow | undefined> {
  const t = Date.now();
  const row = await db.kysely
    .updateTable('user_keys')
    .set({ status: 'revoked', revoked_at: t, updated_at: bumped(t) })
    .where('key_id', '=', id)
    .where('status', '=', 'active')
    .returningAll()
    .executeTakeFirst();
  return row ?? getKey(db, id);
}

export interface KeyCursor {
  created_at: number;
  key_id: string;
}

/** Keys newest first, by city and user when given. */
export async function listKeys(db: Db, f: { cityId?: string; userId?: string; after?: KeyCursor; limit: number }): Promise<KeyRow[]> {
  let q = db.kysely.selectFrom('user_keys').selectAll();
  if (f.cityId !== undefined) q = q.where('city_id', '=', f.cityId);
  if (f.userId !== undefined) q = q.where('user_id', '=', f.userId);
  if (f.after) {
    const { created_at, key_id } = f.after;
    q = q.where((eb) => eb.or([eb('created_at', '<', created_at), eb.and([eb('created_at', '=', created_at), eb('key_id', '<', key_id)])]));
  }
  return q.orderBy('created_at', 'desc').orderBy('key_id', 'desc').limit(f.limit).execute();
}

/** Active keys of a user (the cap on how many one user may hold). */
export async function activeKeyCount(db: Db, cityId: string, userId: string): Promise<number> {
  const row = await db.kysely
    .selectFrom('user_keys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('city_id', '=', cityId)
    .where('user_id', '=', userId)
    .where('status', '=', 'active')
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}
