// Per-city alert thresholds: balance.low fires when a user's balance goes below balance_low
// credits (once per crossing; see events.ts). A city without one sends no balance.low.
import { z } from 'zod';
import { badRequest } from '../../kernel/errors.ts';
import { action } from '../../kernel/service.ts';
import { cityIdSchema, requireCity } from '../cities/index.ts';
import { scopedCity } from './scope.ts';

const alertsSchema = z.object({ city_id: z.string(), balance_low: z.number().int().nullable().describe('credits; null: no balance.low') });

export const alertActions = {
  alerts: action({
    method: 'GET',
    auth: ['admin', 'bureau'],
    summary: "A city's alert thresholds",
    input: z.object({ city_id: cityIdSchema.optional() }),
    output: alertsSchema,
    handler: async ({ gateway, identity, input }) => {
      const city = scopedCity(identity, input.city_id);
      if (!city) throw badRequest('missing_city', 'city_id is required.', 'city_id');
      await requireCity(gateway, city, identity);
      const row = await gateway.db.kysely.selectFrom('webhook_alerts').selectAll().where('city_id', '=', city).executeTakeFirst();
      return { city_id: city, balance_low: row?.balance_low === undefined || row.balance_low === null ? null : Number(row.balance_low) };
    },
  }),
  'alerts/update': action({
    method: 'POST',
    auth: ['admin', 'bureau'],
    summary: "Set a city's alert thresholds",
    input: z.object({ city_id: cityIdSchema.optional(), balance_low: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).nullable() }),
    output: alertsSchema,
    handler: async ({ gateway, identity, input }) => {
      const city = scopedCity(identity, input.city_id);
      if (!city) throw badRequest('missing_city', 'city_id is required.', 'city_id');
      await requireCity(gateway, city, identity);
      const at = Date.now();
      await gateway.db.kysely
        .insertInto('webhook_alerts')
        .values({ city_id: city, balance_low: input.balance_low, updated_at: at })
        .onConflict((oc) => oc.column('city_id').doUpdateSet({ balance_low: input.balance_low, updated_at: at }))
        .execute();
      return { city_id: city, balance_low: input.balance_low };
    },
  }),
};
