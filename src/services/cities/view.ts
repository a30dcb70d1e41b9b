// The city as the API answers it, in one place: the zod schemas document /openapi.json and the
// mappers' return types are what the client SDK infers, so the two cannot drift apart.
import { z } from 'zod';
import { cityLimitsSchema, parseCitySettings, pricesSchema, requestLogSchema, userBudgetSchema, type CitySettings } from '../../kernel/city-settings.ts';
import type { CityRow } from './store.ts';

/** What any credential bound to the city may see (users included): no settings. */
export const citySchema = z.object({
  city_id: z.string(),
  name: z.string(),
  status: z.enum(['active', 'paused']),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
export type City = z.output<typeof citySchema>;

/** The users' page settings, every field present. */
export const userPageViewSchema = z
  .object({ enabled: z.boolean(), logo_url: z.string().nullable(), accent_color: z.string().nullable() })
  .describe("the users' page at /u/<city_id>/: on or off, its logo URL and accent colour");

/** Every limit present; null = not set for this city, so its RATE_LIMIT_* env key applies. */
const limitsView = cityLimitsSchema.required().describe('0 = off for this city; null = not set, its RATE_LIMIT_* env key applies');

/** The city with its settings: what the admin and the city's own bureau see (get, list, update). */
export const cityWithSettingsSchema = citySchema.extend({
  limits: limitsView,
  user_budget: userBudgetSchema.nullable().describe('null: no cap'),
  models: z.array(z.string()).nullable().describe("the models (ids or aliases) the city's users may call; null: all"),
  price_multiplier: z.number().describe('the base price × this'),
  prices: z.record(z.string(), pricesSchema).describe("per model id: price fields that replace base × multiplier"),
  request_log: requestLogSchema.nullable().describe('null: not set for this city, the REQUEST_LOG env key applies'),
  user_page: userPageViewSchema,
});
export type CityWithSettings = z.output<typeof cityWithSettingsSchema>;

export const toCity = (r: CityRow): City => ({
  city_id: r.city_id,
  name: r.name,
  status: r.status === 'paused' ? 'paused' : 'active',
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

export const userPageView = (s: CitySettings) => ({
  enabled: s.user_page?.enabled !== false,
  logo_url: s.user_page?.logo_url ?? null,
  accent_color: s.user_page?.accent_color ?? null,
});

function settingsView(s: CitySettings): Pick<CityWithSettings, 'limits' | 'user_budget' | 'models' | 'price_multiplier' | 'prices' | 'request_log' | 'user_page'> {
  const l = s.limits ?? {};
  return {
    limits: {
      user_rpm: l.user_rpm ?? null,
      user_tpm: l.user_tpm ?? null,
      city_rpm: l.city_rpm ?? null,
      city_tpm: l.city_tpm ?? null,
      user_concurrency: l.user_concurrency ?? null,
    },
    user_budget: s.user_budget ?? null,
    models: s.models ?? null,
    price_multiplier: s.price_multiplier ?? 1,
    prices: s.prices ?? {},
    request_log: s.request_log ?? null,
    user_page: userPageView(s),
  };
}

export const toCityWithSettings = (r: CityRow): CityWithSettings => ({ ...toCity(r), ...settingsView(parseCitySettings(r.settings)) });
