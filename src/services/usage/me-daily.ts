// usage/me/daily: the calling user's calls, tokens and credits per UTC day (the users' page
// chart). The rollup has no user dimension, so this sums the user's own records over the
// (city_id, user_id, created_at) index; the range is capped at 90 days.
import { sql } from 'kysely';
import { z } from 'zod';
import type { Identity } from '../../kernel/identity.ts';
import { action } from '../../kernel/service.ts';

const DAY_MS = 86_400_000;

/** A key's id, or its prefix cg_key_<id> (as usage/me takes it). */
const keyId = z
  .string()
  .trim()
  .regex(/^(cg_key_)?[a-z0-9]{12}$/, 'a key id (12 of a-z, 0-9)')
  .transform((s) => s.replace(/^cg_key_/, ''));

export const meDailyAction = action({
  method: 'GET',
  auth: ['user'],
  summary: 'The calling user’s calls, tokens and credits per UTC day, oldest first (days with no calls left out)',
  input: z.object({
    city_id: z.string().optional(),
    days: z.coerce.number().int().min(1).max(90).default(30).describe('this many UTC days up to today'),
    key_id: keyId.optional().describe('only calls made with this API key'),
  }),
  output: z.object({
    from: z.string(),
    to: z.string(),
    items: z.array(z.object({ day: z.string(), calls: z.number(), errors: z.number(), input_tokens: z.number(), output_tokens: z.number(), credits: z.number() })),
  }),
  handler: async ({ gateway, identity, input }) => {
    const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
    const start = (Math.floor(Date.now() / DAY_MS) - input.days + 1) * DAY_MS;
    // inlined, so both dialects divide integers (a bound number may arrive as a double)
    const dayNo = sql<number>`CAST(created_at / ${sql.lit(DAY_MS)} AS INTEGER)`;
    let q = gateway.db.kysely.selectFrom('usage').where('city_id', '=', cityId).where('user_id', '=', userId).where('created_at', '>=', start);
    if (input.key_id) q = q.where('key_id', '=', input.key_id);
    const rows = await q
      .select([
        dayNo.as('d'),
        sql<number>`count(*)`.as('calls'),
        sql<number>`sum(case when status = 'ok' then 0 else 1 end)`.as('errors'),
        sql<number>`sum(input_tokens)`.as('input_tokens'),
        sql<number>`sum(output_tokens)`.as('output_tokens'),
        sql<number>`sum(credits)`.as('credits'),
      ])
      .groupBy(dayNo)
      .orderBy(dayNo)
      .execute();
    const day = (n: number) => new Date(n * DAY_MS).toISOString().slice(0, 10);
    return {
      from: day(start / DAY_MS),
      to: day(Math.floor(Date.now() / DAY_MS)),
      items: rows.map((r) => ({
        day: day(Number(r.d)),
        calls: Number(r.calls),
        errors: Number(r.errors),
        input_tokens: Number(r.input_tokens),
        output_tokens: Number(r.output_tokens),
        credits: Number(r.credits),
      })),
    };
  },
});
