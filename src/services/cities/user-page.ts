// cities/page: what the users' page (/u/<city_id>/) shows before anyone signs in — the city's
// name and branding. No credential; a city whose page is off answers as no city at all.
import { z } from 'zod';
import { parseCitySettings } from '../../kernel/city-settings.ts';
import { notFound } from '../../kernel/errors.ts';
import { action } from '../../kernel/service.ts';
import { getCity } from './store.ts';
import { userPageView } from './view.ts';

export const pageAction = action({
  method: 'GET',
  auth: [],
  ipLimited: true,
  summary: "The users' page of a city: its name, status, logo URL and accent colour (404 when the city has none or turned it off)",
  output: z.object({
    city_id: z.string(),
    name: z.string(),
    status: z.enum(['active', 'paused']),
    logo_url: z.string().nullable(),
    accent_color: z.string().nullable(),
  }),
  input: z.object({ city_id: z.string().min(1).max(64) }),
  handler: async ({ gateway, input }) => {
    const row = await getCity(gateway.db, input.city_id);
    const page = row && row.status !== 'removed' ? userPageView(parseCitySettings(row.settings)) : null;
    if (!row || !page?.enabled) throw notFound('page_not_available', `City '${input.city_id}' has no users' page.`, 'city_id');
    return { city_id: row.city_id, name: row.name, status: row.status === 'paused' ? ('paused' as const) : ('active' as const), logo_url: page.logo_url, accent_color: page.accent_color };
  },
});
