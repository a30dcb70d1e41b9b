// Resolves the bearer credential of a request to an identity. A credential that is present
// but not valid is a 401, even on actions open to guests: callers learn at once that their
// key is wrong instead of silently acting as a guest.
import type { GatewayContext } from './context.ts';
import { safeEqual, sha256Hex } from './crypto.ts';
import { unauthorized } from './errors.ts';
import { BUREAU_TOKEN_PREFIX, bearer, type Identity } from './identity.ts';

export async function authenticate(req: Request, gw: GatewayContext, credentialHeader?: string): Promise<Identity> {
  let token = bearer(req);
  if (token === null && credentialHeader) token = req.headers.get(credentialHeader)?.trim() || null;
  if (token === null) return { kind: 'guest' };
  if (token === '') throw unauthorized('invalid_authorization', 'The Authorization header must be "Bearer <token>".');

  if (token.startsWith('eyJ')) {
    const c = await gw.keys.verify(token);
    return { kind: 'user', cityId: c.cityId, userId: c.userId, expiresAt: c.expiresAt, metadata: c.metadata };
  }

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
