// GET /u/<city_id>/: the page each city's users get (sign in, balance, top-ups, usage, keys).
// It is a second entry of the console's build (console/users.html, the same components and
// assets under /console/assets/), served with the console's headers; only the image sources
// widen, to the one origin of the city's logo. A city whose page is off, or no city at all,
// answers the same plain 404 page, so the route does not tell the two apart.
import type { CitySettings } from './city-settings.ts';
import { CONSOLE_HEADERS, NOT_BUILT, type ConsoleAssets } from './console.ts';

const CITY_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const LOGO_ORIGIN = /^https:\/\/(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/;

/** The console's headers, with img-src widened to the logo's origin (a checked https origin only). */
export function userPageHeaders(logoUrl: string | undefined): Record<string, string> {
  let origin: string | null = null;
  if (logoUrl) {
    try {
      origin = new URL(logoUrl).origin;
    } catch {
      origin = null;
    }
  }
  const csp = CONSOLE_HEADERS['content-security-policy'];
  return {
    ...CONSOLE_HEADERS,
    'content-security-policy': origin && LOGO_ORIGIN.test(origin) ? csp.replace("img-src 'self' data:", `img-src 'self' data: ${origin}`) : csp,
    'cache-control': 'no-cache',
  };
}

const NOT_AVAILABLE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>Not available</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:15vh auto;padding:0 1rem;color:#1d2330}h1{font-size:1.4rem}</style></head>
<body><h1>This page is not available</h1><p>There is no users' page at this address.</p></body></html>`;

export interface UserPageCities {
  get(cityId: string): Promise<'active' | 'paused' | 'removed' | string | null>;
  settings(cityId: string): Promise<CitySettings>;
}

/** /u/<city>/ → the page; /u/<city> → /u/<city>/; anything else under /u/ → null (the gateway's 404). */
export async function serveUserPage(pathname: string, cities: UserPageCities, assets: ConsoleAssets | undefined): Promise<Response | null> {
  const m = /^\/u\/([^/]+)(\/?)$/.exec(pathname);
  if (!m) return null;
  const cityId = m[1];
  const notAvailable = () => new Response(NOT_AVAILABLE, { status: 404, headers: { ...CONSOLE_HEADERS, 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' } });
  if (!CITY_ID.test(cityId)) return notAvailable();
  const status = await cities.get(cityId);
  const settings = status === 'active' || status === 'paused' ? await cities.settings(cityId) : null;
  if (!settings || settings.user_page?.enabled === false) return notAvailable();
  if (!m[2]) return new Response(null, { status: 308, headers: { location: `/u/${cityId}/` } });
  const file = assets ? await assets.get('users.html') : null;
  if (!file) return new Response(NOT_BUILT, { status: 503, headers: { ...CONSOLE_HEADERS, 'content-type': 'text/html; charset=utf-8' } });
  return new Response(file.body, { headers: { ...userPageHeaders(settings.user_page?.logo_url), 'content-type': file.type } });
}
