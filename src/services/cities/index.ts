// cities: tenants. Admin manages them; a city's bureau (trusted backend) may list its own
// city and issue user tokens for it.
import { z } from 'zod';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import { conflict, forbidden, notFound } from '../../kernel/errors.ts';
import { boundCity, type Identity } from '../../kernel/identity.ts';
import { action, defineService } from '../../kernel/service.ts';
import { getCity, insertCity, listCities, setCityStatus, type CityRow } from './store.ts';
import { citySchema as city, cityWithSettingsSchema, toCity, toCityWithSettings } from './view.ts';
import { issueUserToken, tokenApplyInput } from './tokens.ts';
import { ACCOUNTS, type AccountsCapability } from '../accounts/capability.ts';
import { parseCitySettings } from '../../kernel/city-settings.ts';
import { dispatchSoon } from '../webhooks/dispatch.ts';
import { securityActions } from './security.ts';
import { pageAction } from './user-page.ts';

export const cityIdSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, 'letters, digits, _ and - only, starting with a letter or digit');
const byId = z.object({ city_id: cityIdSchema });

/** A live city or 404; bureaus only reach their own. */
export async function requireCity(gw: GatewayContext, cityId: string, identity?: Identity): Promise<CityRow> {
  const bound = identity ? boundCity(identity) : null;
  if (bound && bound !== cityId) throw forbidden('city_mismatch', 'This credential is bound to another city.');
  const row = await getCity(gw.db, cityId);
  if (!row || row.status === 'removed') throw notFound('city_not_found', `No city '${cityId}'.`, 'city_id');
  return row;
}

async function transition(gw: GatewayContext, cityId: string, to: CityRow['status']) {
  await requireCity(gw, cityId);
  const row = (await setCityStatus(gw.db, cityId, to))!;
  gw.cities.set(cityId, row.status, parseCitySettings(row.settings));
  gw.waitUntil(dispatchSoon(gw));
  return row;
}

export const citiesService = defineService({
  id: 'cities',
  name: 'Cities',
  description: 'Tenants: each product is a city, and every user token is bound to one.',
  actions: {
    list: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'List cities with their limits and user budget (a bureau sees only its own)',
      output: z.object({ items: z.array(cityWithSettingsSchema) }),
      handler: async ({ gateway, identity }) => ({
        items: (await listCities(gateway.db, boundCity(identity) ?? undefined)).map(toCityWithSettings),
      }),
    }),
    current: action({
      method: 'GET',
      auth: ['user', 'bureau'],
      summary: 'The city this credential is bound to (without its settings: a user token sees no limits)',
      output: city,
      input: z.object({ city_id: z.string().optional() }),
      handler: async ({ gateway, identity }) => toCity(await requireCity(gateway, boundCity(identity)!)),
    }),
    page: pageAction,
    get: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Get one city with its limits and user budget (a bureau: its own city); reading changes nothing',
      output: cityWithSettingsSchema,
      input: byId,
      handler: async ({ gateway, input, identity }) => toCityWithSettings(await requireCity(gateway, input.city_id, identity)),
    }),
    create: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Create a city',
      output: city,
      errors: [409],
      input: z.object({ name: z.string().trim().min(1).max(200), city_id: cityIdSchema.optional() }),
      handler: async ({ gateway, input }) => {
        const cityId = input.city_id ?? newId('city', 9);
        const row = await insertCity(gateway.db, cityId, input.name);
        if (!row) throw conflict('city_exists', `The city id '${cityId}' is taken.`, 'city_id');
        gateway.cities.set(cityId, 'active');
        return toCity(row);
      },
    }),
    pause: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Pause a city: its user tokens get 403 until it is activated',
      output: city,
      input: byId,
      handler: async ({ gateway, input }) => toCity(await transition(gateway, input.city_id, 'paused')),
    }),
    activate: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Activate a paused city',
      output: city,
      input: byId,
      handler: async ({ gateway, input }) => toCity(await transition(gateway, input.city_id, 'active')),
    }),
    remove: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Remove a city: its tokens stop working, its records stay, its id is never reused',
      input: byId,
      handler: async ({ gateway, input }) => {
        await transition(gateway, input.city_id, 'removed');
        return { city_id: input.city_id, removed: true };
      },
    }),
    'tokens/apply': action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Issue a user token bound to one city and one user',
      output: z.object({ user_token: z.string(), city_id: z.string(), user_id: z.string(), expires_at: z.iso.datetime() }),
      errors: [409],
      input: tokenApplyInput,
      handler: async ({ gateway, input, identity }) => {
        const city = await requireCity(gateway, input.city_id, identity);
        if (city.status === 'paused') throw conflict('city_paused', 'Tokens cannot be issued for a paused city.', 'city_id');
        // The user joins the city's user directory (accounts/users) when accounts is mounted.
        await gateway.use<AccountsCapability>(ACCOUNTS)?.registerUser({ city_id: input.city_id, user_id: input.user_id, via: 'token' });
        return issueUserToken(gateway, input);
      },
    }),
    ...securityActions(requireCity),
  },
});
