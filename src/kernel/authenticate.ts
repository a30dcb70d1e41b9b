// Resolves the bearer credential of a request to an identity. A credential that is present
// but not valid is a 401, even on actions open to guests: callers learn at once that their
// key is wrong instead of silently acting as a guest.
// The credential is `Authorization: Bearer …`, else the action's own header, else `x-api-key`
// (Anthropic's clients) or `x-goog-api-key` (Google's): any credential in any of them.
import type { GatewayContext } from './context.ts';
import { safeEqual, sha256Hex } from './crypto.ts';
import { unauthorized } from './errors.ts';
import { BUREAU_TOKEN_PREFIX, USER_KEY_PREFIX, bearer, type Identity } from './identity.ts';

export async function authenticate(req: Request, gw: GatewayContext, credentialHeader?: string): Promise<Identity> {
  let token = bearer(req);
  if (token === null) {
    if (credentialHeader) token = req.headers.get(credentialHeader)?.trim() || null;
    token ??= req.headers.get('x-api-key')?.trim() || req.headers.get('x-goog-api-key')?.trim() || null;
  }
  if (token === null) return { kind: 'guest' };
  if (token === '') throw unauthorized('invalid_authorization', 'The Authorization header must be "Bearer <token>".');

  if (token.startsWith('eyJ')) {
    const c = await gw.keys.verify(token);
    return { kind: 'user', cityId: c.cityId, userId: c.userId, expiresAt: c.expiresAt, metadata: c.metadata };
  }

  // A user's API key (kernel/user-keys.ts): from memory once verified.
  if (token.startsWith(USER_KEY_PREFIX)) return gw.userKeys.verify(token);

  if (token.startsWith(BUREAU_TOKEN_PREFIX)) {
    const row = await gw.db.kysely
      .selectFrom('bureaus')
      .select(['bureau_id', 'city_id'])
      .where('token_hash', '=', await sha256Hex(token))
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (row && (await gw.cities.get(row.city_id)) !== 'removed') {
      return { kind: 'bureau', cityId: row.city_id, bureauId: row.bureau_id };
    }
    throw unauthorized('invalid_token', 'The bearer token is not valid.');
  }

  const adminKey = gw.env.get('GATEWAY_ADMIN_SECRET_KEY');
  if (adminKey && (await safeEqual(token, adminKey))) return { kind: 'admin' };
  throw unauthorized('invalid_token', 'The bearer token is not valid.');
}
