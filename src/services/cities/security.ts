// cities: the actions of issue 15 — per-city settings (rate limits, user budget), revoking
// a user's tokens, rotating the signing key.
import { z } from 'zod';
import {
  cityLimitsSchema,
  cityModelsSchema,
  cityPricesSchema,
  parseCitySettings,
  priceMultiplierSchema,
  requestLogSchema,
  userBudgetSchema,
  userPageSchema,
  type CitySettings,
} from '../../kernel/city-settings.ts';
import type { Prices } from '../../kernel/metering.ts';
import { forbidden, GatewayError } from '../../kernel/errors.ts';
import { action } from '../../kernel/service.ts';
import { userIdSchema } from './tokens.ts';
import type { requireCity as RequireCity } from './index.ts';
import { getCity } from './store.ts';
import { cityWithSettingsSchema, toCityWithSettings } from './view.ts';

const cityRef = z.string().min(1).max(64);

type SettingsChange = {
  limits?: CitySettings['limits'] | null;
  user_budget?: CitySettings['user_budget'] | null;
  models?: string[] | null;
  price_multiplier?: number | null;
  prices?: Record<string, Prices | null> | null;
  request_log?: CitySettings['request_log'] | null;
  user_page?: { enabled?: boolean; logo_url?: string | null; accent_color?: string | null } | null;
};

/** The settings after an update: limits merged key by key (null = back to the env), the budget replaced. */
function merged(current: CitySettings, input: SettingsChange): CitySettings {
  const next: CitySettings = { ...current };
  if (input.limits === null) delete next.limits;
  else if (input.limits) {
    const limits = { ...current.limits, ...input.limits };
    for (const k of Object.keys(limits) as (keyof typeof limits)[]) if (limits[k] == null) delete limits[k];
    next.limits = limits;
  }
  if (input.user_budget === null) delete next.user_budget;
  else if (input.user_budget) next.user_budget = input.user_budget;
  if (input.models === null) delete next.models;
  else if (input.models) next.models = [...new Set(input.models)];
  if (input.price_multiplier === null || input.price_multiplier === 1) delete next.price_multiplier;
  else if (input.price_multiplier !== undefined) next.price_multiplier = input.price_multiplier;
  if (input.prices === null) delete next.prices;
  else if (input.prices) {
    // merged model by model; null removes a model's entry
    const prices = { ...current.prices };
    for (const [id, p] of Object.entries(input.prices)) {
      if (p === null) delete prices[id];
      else prices[id] = p;
    }
    if (Object.keys(prices).length) next.prices = prices;
    else delete next.prices;
  }
  if (input.request_log === null) delete next.request_log;
  else if (input.request_log) next.request_log = input.request_log;
  if (input.user_page === null) delete next.user_page;
  else if (input.user_page) {
    // merged field by field; null removes the logo or the colour
    const page = { ...current.user_page, ...input.user_page };
    for (const k of Object.keys(page) as (keyof typeof page)[]) if (page[k] == null) delete page[k];
    if (Object.keys(page).length) next.user_page = page as CitySettings['user_page'];
    else delete next.user_page;
  }
  return next;
}

export function securityActions(requireCity: typeof RequireCity) {
  return {
    update: action({
      method: 'POST',
      auth: ['admin'],
      summary:
        "Update a city: name, rate limits (override the RATE_LIMIT_* env keys; 0 = off, null = env), a spending cap per user, its models and prices (allow-list, price multiplier, per-model prices), its request logs (request_log: off, metadata or full; null = the REQUEST_LOG env key), and its users' page (user_page: enabled, logo_url, accent_color)",
      description: 'Answers the city as `cities/get` does. To read the settings, call `cities/get`: an update always moves `updated_at`.',
      output: cityWithSettingsSchema,
      errors: [409],
      input: z.object({
        city_id: cityRef,
        name: z.string().trim().min(1).max(200).optional(),
        limits: cityLimitsSchema.nullable().optional(),
        user_budget: userBudgetSchema.nullable().optional(),
        models: cityModelsSchema.nullable().optional(),
        price_multiplier: priceMultiplierSchema.nullable().optional(),
        prices: cityPricesSchema.nullable().optional(),
        request_log: requestLogSchema.nullable().optional(),
        user_page: userPageSchema.nullable().optional(),
      }),
      handler: async ({ gateway, input }) => {
        let row = await requireCity(gateway, input.city_id);
        // Read, merge, write only if the settings are still what was read (else read again):
        // concurrent updates of different fields, on any process, all land.
        for (let attempt = 1; ; attempt++) {
          const next = merged(parseCitySettings(row.settings), input);
          const r = await gateway.db.kysely
            .updateTable('cities')
            .set({ settings: JSON.stringify(next), updated_at: Date.now(), ...(input.name ? { name: input.name } : {}) })
            .where('city_id', '=', input.city_id)
            .where('status', '!=', 'removed')
            .where((eb) => (row.settings === null ? eb('settings', 'is', null) : eb('settings', '=', row.settings)))
            .executeTakeFirst();
          if (Number(r.numUpdatedRows) > 0) break;
          if (attempt >= 20) throw new GatewayError(409, 'concurrent_update', 'The city kept changing under this update; try it again.');
          row = await requireCity(gateway, input.city_id); // changed meanwhile (or removed: 404)
        }
        const after = (await getCity(gateway.db, input.city_id))!;
        gateway.cities.set(after.city_id, after.status, parseCitySettings(after.settings));
        return toCityWithSettings(after);
      },
    }),
    'tokens/revoke': action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Revoke every token issued to a user before now (a bureau: users of its own city); every replica refuses them within 3 s',
      output: z.object({ city_id: z.string(), user_id: z.string(), revoked_before: z.iso.datetime() }),
      input: z.object({ city_id: cityRef, user_id: userIdSchema }),
      handler: async ({ gateway, input, identity }) => {
        if (identity.kind === 'bureau' && identity.cityId !== input.city_id) throw forbidden('city_mismatch', 'This credential is bound to another city.');
        await requireCity(gateway, input.city_id, identity);
        const before = await gateway.keys.revocations.revokeUser(input.city_id, input.user_id);
        return { city_id: input.city_id, user_id: input.user_id, revoked_before: new Date(before).toISOString() };
      },
    }),
    'keys/rotate': action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Start a new signing key; old keys stay in the JWKS and verify until their tokens expire',
      output: z.object({ kid: z.string(), retired: z.array(z.string()) }),
      handler: async ({ gateway }) => gateway.keys.rotate(),
    }),
  };
}
