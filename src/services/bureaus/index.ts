// bureaus: credentials for a city's trusted backend. The token is shown once; only its
// SHA-256 is stored. Revocation is checked on every request.
import { z } from 'zod';
import { newId, randomToken, sha256Hex } from '../../kernel/crypto.ts';
import { notFound } from '../../kernel/errors.ts';
import { BUREAU_TOKEN_PREFIX } from '../../kernel/identity.ts';
import { action, defineService } from '../../kernel/service.ts';
import { cityIdSchema, requireCity } from '../cities/index.ts';

const toBureau = (r: { bureau_id: string; city_id: string; name: string; created_at: number; revoked_at: number | null }) => ({
  bureau_id: r.bureau_id,
  city_id: r.city_id,
  name: r.name,
  status: r.revoked_at ? 'revoked' : 'active',
  created_at: new Date(r.created_at).toISOString(),
  revoked_at: r.revoked_at ? new Date(r.revoked_at).toISOString() : null,
});

export const bureausService = defineService({
  id: 'bureaus',
  name: 'Bureaus',
  description: 'Credentials for a city’s trusted backend, scoped to that city.',
  actions: {
    create: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Create a bureau credential for a city (the token is shown once)',
      input: z.object({ city_id: cityIdSchema, name: z.string().trim().min(1).max(200) }),
      handler: async ({ gateway, input }) => {
        await requireCity(gateway, input.city_id);
        const token = `${BUREAU_TOKEN_PREFIX}${randomToken(32)}`;
        const row = {
          bureau_id: newId('bur', 9),
          city_id: input.city_id,
          name: input.name,
          token_hash: await sha256Hex(token),
          created_at: Date.now(),
          revoked_at: null,
        };
        await gateway.db.kysely.insertInto('bureaus').values(row).execute();
        return { ...toBureau(row), bureau_token: token };
      },
    }),
    list: action({
      method: 'GET',
      auth: ['admin'],
      summary: 'List bureaus, optionally of one city',
      input: z.object({ city_id: cityIdSchema.optional() }),
      handler: async ({ gateway, input }) => {
        let q = gateway.db.kysely
          .selectFrom('bureaus')
          .select(['bureau_id', 'city_id', 'name', 'created_at', 'revoked_at']);
        if (input.city_id) q = q.where('city_id', '=', input.city_id);
        return { items: (await q.orderBy('created_at').execute()).map(toBureau) };
      },
    }),
    revoke: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Revoke a bureau credential (effective on the next request)',
      input: z.object({ bureau_id: z.string().min(1).max(64) }),
      handler: async ({ gateway, input }) => {
        const res = await gateway.db.kysely
          .updateTable('bureaus')
          .set({ revoked_at: Date.now() })
          .where('bureau_id', '=', input.bureau_id)
          .where('revoked_at', 'is', null)
          .executeTakeFirst();
        if (Number(res.numUpdatedRows) === 0) {
          const exists = await gateway.db.kysely.selectFrom('bureaus').select('bureau_id').where('bureau_id', '=', input.bureau_id).executeTakeFirst();
          if (!exists) throw notFound('bureau_not_found', `No bureau '${input.bureau_id}'.`, 'bureau_id');
        }
        return { bureau_id: input.bureau_id, revoked: true };
      },
    }),
  },
});
