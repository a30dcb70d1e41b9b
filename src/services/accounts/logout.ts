// accounts/logout: revokes the user token it is called with (the user's other tokens stay
// valid). Every process and replica refuses it within 2 s; this one at once.
import { z } from 'zod';
import { bearer } from '../../kernel/identity.ts';
import { action } from '../../kernel/service.ts';

export const logoutAction = action({
  method: 'POST',
  auth: ['user'],
  summary: 'Revoke the user token this call is made with',
  output: z.object({ revoked: z.literal(true), expires_at: z.iso.datetime() }),
  handler: async ({ gateway, request }) => {
    const claims = await gateway.keys.verify(bearer(request)!);
    await gateway.keys.revocations.revokeToken({ ...claims, issuedAt: claims.issuedAt ?? 0 });
    return { revoked: true as const, expires_at: new Date(claims.expiresAt).toISOString() };
  },
});
