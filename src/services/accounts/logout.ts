// accounts/logout: revokes the user token it is called with (the user's other tokens stay
// valid). Every process and replica refuses it within 2 s; this one at once.
import { z } from 'zod';
import { badRequest } from '../../kernel/errors.ts';
import { bearer } from '../../kernel/identity.ts';
import { action } from '../../kernel/service.ts';

export const logoutAction = action({
  method: 'POST',
  auth: ['user'],
  summary: 'Revoke the user token this call is made with',
  output: z.object({ revoked: z.literal(true), expires_at: z.iso.datetime() }),
  handler: async ({ gateway, request, identity }) => {
    // An API key is not a login: it is revoked with accounts/keys/revoke (by a signed-in user).
    if (identity.kind === 'user' && identity.keyId !== undefined) throw badRequest('not_a_login_token', 'This call is made with an API key; revoke it with accounts/keys/revoke.');
    const token = bearer(request) || request.headers.get('x-api-key') || request.headers.get('x-goog-api-key');
    const claims = await gateway.keys.verify(token!);
    await gateway.keys.revocations.revokeToken({ ...claims, issuedAt: claims.issuedAt ?? 0 });
    return { revoked: true as const, expires_at: new Date(claims.expiresAt).toISOString() };
  },
});
