// Users and their OAuth identities. No interactive transactions: every write that must be
// atomic is one statement or one batch, so concurrent logins of one person converge.
import { eventStatement } from '../webhooks/events.ts';
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { UserIdentitiesTable, UsersTable } from '../../db/schema.ts';
import { newId } from '../../kernel/crypto.ts';
import type { UserOrigin } from './capability.ts';

export type UserRow = UsersTable;
export type IdentityRow = UserIdentitiesTable;

/** What an identity provider says about the person who signed in. */
export interface ProviderProfile {
  provider: 'github' | 'google';
  providerUserId: string;
  username: string | null;
  name: string | null;
  email: string | null;
  emailVerified: boolean;
  avatarUrl: string | null;
}

export interface User {
  city_id: string;
  user_id: string;
  name: string | null;
  email: string | null;
  email_verified: boolean;
  avatar_url: string | null;
  created_via: string;
  created_at: string;
  updated_at: string;
  last_login_at: string | null;
}

const iso = (t: number | null) => (t == null ? null : new Date(t).toISOString());

export const toUser = (r: UserRow): User => ({
  city_id: r.city_id,
  user_id: r.user_id,
  name: r.name,
  email: r.email,
  email_verified: r.email_verified === 1,
  avatar_url: r.avatar_url,
  created_via: r.created_via,
  created_at: iso(r.created_at)!,
  updated_at: iso(r.updated_at)!,
  last_login_at: iso(r.last_login_at),
});

export const toIdentity = (r: IdentityRow) => ({
  provider: r.provider,
  provider_user_id: r.provider_user_id,
  username: r.username,
  email: r.email,
  email_verified: r.email_verified === 1,
  created_at: iso(r.created_at)!,
  last_login_at: iso(r.last_login_at),
});

export async function getUser(db: Db, cityId: string, userId: string): Promise<UserRow | undefined> {
  return db.kysely.selectFrom('users').selectAll().where('city_id', '=', cityId).where('user_id', '=', userId).executeTakeFirst();
}

export async function identitiesOf(db: Db, cityId: string, userId: string): Promise<IdentityRow[]> {
  return db.kysely
    .selectFrom('user_identities')
    .selectAll()
    .where('city_id', '=', cityId)
    .where('user_id', '=', userId)
    .orderBy('created_at')
    .execute();
}

/** Inserts a user unless it exists; true when this call created it. */
export async function ensureUser(
  db: Db,
  a: { cityId: string; userId: string; via: UserOrigin; name?: string | null; login?: boolean },
): Promise<boolean> {
  const t = Date.now();
  const [res] = await db.batch([
    db.kysely
      .insertInto('users')
      .values({
        city_id: a.cityId,
        user_id: a.userId,
        name: a.name ?? null,
        email: null,
        email_verified: 0,
        avatar_url: null,
        verified_email: null,
        created_via: a.via,
        created_at: t,
        updated_at: t,
        last_login_at: a.login ? t : null,
      })
      .onConflict((oc) => oc.columns(['city_id', 'user_id']).doNothing()),
    eventStatement(db, {
      type: 'user.created',
      cityId: a.cityId,
      userId: a.userId,
      data: { provider: a.via, name: a.name ?? null },
      at: t,
      when: sql`EXISTS (SELECT 1 FROM users WHERE city_id = ${a.cityId} AND user_id = ${a.userId} AND created_at = ${t} AND created_via = ${a.via})`,
    }),
  ]);
  const created = res.changes > 0;
  if (!created && a.login) {
    await db.kysely
      .updateTable('users')
      .set({ last_login_at: t, updated_at: t, ...(a.name ? { name: a.name } : {}) })
      .where('city_id', '=', a.cityId)
      .where('user_id', '=', a.userId)
      .execute();
  }
  return created;
}

/** The user an OAuth identity belongs to, if it has one. */
function identityOwner(db: Db, cityId: string, p: ProviderProfile) {
  return db.kysely
    .selectFrom('user_identities')
    .select('user_id')
    .where('city_id', '=', cityId)
    .where('provider', '=', p.provider)
    .where('provider_user_id', '=', p.providerUserId)
    .executeTakeFirst();
}

/**
 * Finds the user an OAuth identity belongs to, or creates it, race-safely: the identity row
 * is claimed with INSERT … ON CONFLICT DO NOTHING and, in the same batch, the user row is
 * inserted only if the identity now points at it, so two concurrent first logins of one
 * person yield one user and no orphan. With `linkVerifiedEmail`, a new identity whose email
 * its provider verified joins the existing user of the city with that same verified email;
 * an unverified email never links anything.
 */
export async function findOrCreateOAuthUser(
  db: Db,
  cityId: string,
  p: ProviderProfile,
  linkVerifiedEmail: boolean,
): Promise<{ userId: string; created: boolean }> {
  const t = Date.now();
  const verifiedEmail = p.email && p.emailVerified ? p.email.toLowerCase() : null;
  const existing = await identityOwner(db, cityId, p);
  if (existing) {
    await refreshProfiles(db, cityId, existing.user_id, p, t);
    return { userId: existing.user_id, created: false };
  }

  let candidate: string | null = null;
  if (linkVerifiedEmail && verifiedEmail) {
    const owner = await db.kysely
      .selectFrom('users')
      .select('user_id')
      .where('city_id', '=', cityId)
      .where('verified_email', '=', verifiedEmail)
      .orderBy('created_at')
      .limit(1)
      .executeTakeFirst();
    candidate = owner?.user_id ?? null;
  }
  const userId = candidate ?? newId('usr', 12);
  const [identity, user] = await db.batch([
    db.kysely
      .insertInto('user_identities')
      .values({
        city_id: cityId,
        provider: p.provider,
        provider_user_id: p.providerUserId,
        user_id: userId,
        username: p.username,
        email: p.email,
        email_verified: p.emailVerified ? 1 : 0,
        created_at: t,
        updated_at: t,
        last_login_at: t,
      })
      .onConflict((oc) => oc.columns(['city_id', 'provider', 'provider_user_id']).doNothing()),
    // Casts: PostgreSQL types the parameters of an INSERT … SELECT from the SELECT alone.
    sql`INSERT INTO users (city_id, user_id, name, email, email_verified, avatar_url, verified_email, created_via, created_at, updated_at, last_login_at)
        SELECT ${cityId}, ${userId}, ${p.name}, ${p.email}, CAST(${p.emailVerified ? 1 : 0} AS INTEGER), ${p.avatarUrl}, ${verifiedEmail}, ${p.provider},
               CAST(${t} AS BIGINT), CAST(${t} AS BIGINT), CAST(${t} AS BIGINT)
        WHERE EXISTS (SELECT 1 FROM user_identities WHERE city_id = ${cityId} AND provider = ${p.provider} AND provider_user_id = ${p.providerUserId} AND user_id = ${userId})
        ON CONFLICT (city_id, user_id) DO NOTHING`.compile(db.kysely),
    eventStatement(db, {
      type: 'user.created',
      cityId,
      userId,
      data: { provider: p.provider, name: p.name, email: p.email, email_verified: p.emailVerified },
      at: t,
      when: sql`EXISTS (SELECT 1 FROM users WHERE city_id = ${cityId} AND user_id = ${userId} AND created_at = ${t} AND created_via = ${p.provider})`,
    }),
  ]);
  if (identity.changes === 0) {
    // Another login of the same person won the race: use the user it created.
    const winner = await identityOwner(db, cityId, p);
    if (!winner) throw new Error('identity vanished after a lost insert race');
    await refreshProfiles(db, cityId, winner.user_id, p, t);
    return { userId: winner.user_id, created: false };
  }
  if (user.changes === 0) await refreshProfiles(db, cityId, userId, p, t); // linked to an existing user
  return { userId, created: user.changes > 0 };
}

/** The latest login refreshes the identity and the user's profile; a verified email is never replaced by an unverified one. */
async function refreshProfiles(db: Db, cityId: string, userId: string, p: ProviderProfile, t: number): Promise<void> {
  const verifiedEmail = p.email && p.emailVerified ? p.email.toLowerCase() : null;
  const user = await getUser(db, cityId, userId);
  const takeEmail = p.email != null && (p.emailVerified || !user || user.email_verified !== 1);
  await db.batch([
    db.kysely
      .updateTable('user_identities')
      .set({ username: p.username, email: p.email, email_verified: p.emailVerified ? 1 : 0, updated_at: t, last_login_at: t })
      .where('city_id', '=', cityId)
      .where('provider', '=', p.provider)
      .where('provider_user_id', '=', p.providerUserId),
    db.kysely
      .updateTable('users')
      .set({
        ...(p.name ? { name: p.name } : {}),
        ...(p.avatarUrl ? { avatar_url: p.avatarUrl } : {}),
        ...(takeEmail ? { email: p.email, email_verified: p.emailVerified ? 1 : 0, verified_email: verifiedEmail } : {}),
        updated_at: t,
        last_login_at: t,
      })
      .where('city_id', '=', cityId)
      .where('user_id', '=', userId),
  ]);
}

export interface UserCursor {
  created_at: number;
  city_id: string;
  user_id: string;
}

/** A page of users in creation order, of one city or of all. */
export async function listUsers(db: Db, a: { cityId?: string; after?: UserCursor; limit: number }): Promise<UserRow[]> {
  let q = db.kysely.selectFrom('users').selectAll();
  if (a.cityId) q = q.where('city_id', '=', a.cityId);
  if (a.after) {
    const c = a.after;
    q = q.where(sql<boolean>`(created_at, city_id, user_id) > (${c.created_at}, ${c.city_id}, ${c.user_id})`);
  }
  return q.orderBy('created_at').orderBy('city_id').orderBy('user_id').limit(a.limit).execute();
}
