// OAuth login states. A state is random, single-use, bound to one provider and one city, and
// carries the PKCE verifier. Only its SHA-256 is stored. Every transition is one conditional
// UPDATE, so a replayed callback or a second read of the result cannot win twice.
import type { Db } from '../../db/database.ts';
import type { OAuthStatesTable } from '../../db/schema.ts';

export type StateRow = OAuthStatesTable;

export async function insertState(
  db: Db,
  a: { stateHash: string; cityId: string; provider: string; codeVerifier: string; redirectUri: string; returnTo: string | null; expiresAt: number },
): Promise<void> {
  const t = Date.now();
  await db.kysely
    .insertInto('oauth_states')
    .values({
      state_hash: a.stateHash,
      city_id: a.cityId,
      provider: a.provider,
      code_verifier: a.codeVerifier,
      redirect_uri: a.redirectUri,
      return_to: a.returnTo,
      status: 'pending',
      user_id: null,
      error: null,
      created_at: t,
      updated_at: t,
      expires_at: a.expiresAt,
    })
    .execute();
}

export async function getState(db: Db, stateHash: string): Promise<StateRow | undefined> {
  return db.kysely.selectFrom('oauth_states').selectAll().where('state_hash', '=', stateHash).executeTakeFirst();
}

/**
 * Claims a pending, unexpired state for its callback: exactly one caller gets the row (with
 * the verifier); everyone else gets null and learns why from getState.
 */
export async function claimState(db: Db, stateHash: string): Promise<StateRow | null> {
  const t = Date.now();
  const row = await db.kysely
    .updateTable('oauth_states')
    .set({ status: 'exchanging', updated_at: t })
    .where('state_hash', '=', stateHash)
    .where('status', '=', 'pending')
    .where('expires_at', '>', t)
    .returningAll()
    .executeTakeFirst();
  return row ?? null;
}

/** Records the outcome of a claimed state; the result stays collectable for `keepMs`. */
export async function finishState(
  db: Db,
  stateHash: string,
  outcome: { userId: string } | { error: string },
  keepMs: number,
): Promise<void> {
  const t = Date.now();
  await db.kysely
    .updateTable('oauth_states')
    .set({
      ...('userId' in outcome ? { status: 'done' as const, user_id: outcome.userId } : { status: 'failed' as const, error: outcome.error }),
      code_verifier: '',
      updated_at: t,
      expires_at: t + keepMs,
    })
    .where('state_hash', '=', stateHash)
    .where('status', '=', 'exchanging')
    .execute();
}

/** Hands a done result out once: true for exactly one caller. */
export async function deliverState(db: Db, stateHash: string): Promise<boolean> {
  const t = Date.now();
  const res = await db.kysely
    .updateTable('oauth_states')
    .set({ status: 'delivered', updated_at: t })
    .where('state_hash', '=', stateHash)
    .where('status', '=', 'done')
    .where('expires_at', '>', t)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

/** Drops states that expired more than a day ago (their answer is 404 either way). */
export async function pruneStates(db: Db): Promise<void> {
  await db.kysely.deleteFrom('oauth_states').where('expires_at', '<', Date.now() - 86_400_000).execute();
}
