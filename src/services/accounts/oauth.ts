// The OAuth login flow: start → the provider → callback → result. The state row is the login
// attempt; each step moves it with one conditional UPDATE (see states.ts).
import type { GatewayContext } from '../../kernel/context.ts';
import { sha256Hex } from '../../kernel/crypto.ts';
import { GatewayError, badRequest, forbidden, notFound } from '../../kernel/errors.ts';
import type { RequestTiming } from '../../kernel/service.ts';
import { requireCity } from '../cities/index.ts';
import { issueUserToken, type IssuedToken } from '../cities/tokens.ts';
import { PAGE_HEADERS, resultPage } from './page.ts';
import { LoginFailure, PROVIDERS, originOf, providerConfig, type ProviderConfig, type ProviderId } from './providers.ts';
import { claimState, deliverState, finishState, getState, insertState, pruneStates, type StateRow } from './states.ts';
import { findOrCreateOAuthUser, type ProviderProfile } from './store.ts';
import { tokenTtlSeconds, type Hooks } from './settings.ts';
import { publicOriginOrNull } from '../../kernel/public-url.ts';

export const CALLBACK_PATH = '/v1/accounts/oauth/callback';

// arctic (and the @oslojs packages under it, ~90 modules, near a tenth of a boot's) is loaded by
// the first OAuth login, not at boot: most processes never run one.
let arcticModule: Promise<typeof import('arctic')> | undefined;
const arctic = () => (arcticModule ??= import('arctic'));

const UPSTREAM_TIMEOUT_MS = 15_000;

/** The state lifetime: OAUTH_STATE_TTL_SECONDS (1 s to 1 h), default 10 minutes. */
export function stateTtlMs(gw: GatewayContext): number {
  const v = Number(gw.env.get('OAUTH_STATE_TTL_SECONDS'));
  return Number.isInteger(v) && v >= 1 && v <= 3600 ? v * 1000 : 600_000;
}

/** The fixed callback URL to register with the providers. */
export function callbackUrl(gw: GatewayContext, req?: Request): string {
  return gw.publicOrigin(req) + CALLBACK_PATH;
}

/** The origins return_to may point at: the public URL's and OAUTH_ALLOWED_RETURN_ORIGINS. */
export function returnToAllowed(gw: GatewayContext, req: Request | undefined, returnTo: string): URL | null {
  let url: URL;
  try {
    url = new URL(returnTo);
  } catch {
    return null;
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username || url.password) return null;
  const allowed = new Set<string>();
  const origin = publicOriginOrNull(gw, req); // a callback must still answer without it
  if (origin) allowed.add(origin);
  for (const o of (gw.env.get('OAUTH_ALLOWED_RETURN_ORIGINS') ?? '').split(',')) {
    const t = o.trim();
    if (!t) continue;
    try {
      allowed.add(new URL(t).origin);
    } catch {
      /* not an origin: ignore */
    }
  }
  return allowed.has(url.origin) ? url : null;
}

export async function startLogin(
  gw: GatewayContext,
  req: Request,
  input: { city_id: string; provider: ProviderId; return_to?: string },
): Promise<{ state: string; url: string; provider: ProviderId; city_id: string; expires_at: string }> {
  const def = PROVIDERS[input.provider];
  const cfg = providerConfig(gw.env, def);
  if (!cfg) {
    throw badRequest('provider_not_configured', `Login with ${def.name} is not configured (OAUTH_${def.slot}_CLIENT_ID and OAUTH_${def.slot}_CLIENT_SECRET).`, 'provider');
  }
  const city = await requireCity(gw, input.city_id);
  if (city.status === 'paused') throw forbidden('city_paused', 'This city is paused.');
  const redirectUri = callbackUrl(gw, req); // 503 when the public URL is not known
  let returnTo: string | null = null;
  if (input.return_to !== undefined) {
    const url = returnToAllowed(gw, req, input.return_to);
    if (!url) {
      throw badRequest('return_to_not_allowed', 'return_to must be on the public URL’s origin or one listed in OAUTH_ALLOWED_RETURN_ORIGINS.', 'return_to');
    }
    returnTo = url.toString();
  }
  const { CodeChallengeMethod, OAuth2Client, generateCodeVerifier, generateState } = await arctic();
  const state = generateState();
  const verifier = generateCodeVerifier();
  const expiresAt = Date.now() + stateTtlMs(gw);
  await insertState(gw.db, {
    stateHash: await sha256Hex(state),
    cityId: input.city_id,
    provider: def.id,
    codeVerifier: verifier,
    redirectUri,
    returnTo,
    expiresAt,
  });
  gw.waitUntil(pruneStates(gw.db));
  const client = new OAuth2Client(cfg.clientId, cfg.clientSecret, redirectUri);
  const url = client.createAuthorizationURLWithPKCE(cfg.endpoints.authorize, state, CodeChallengeMethod.S256, verifier, def.scopes);
  return { state, url: url.toString(), provider: def.id, city_id: input.city_id, expires_at: new Date(expiresAt).toISOString() };
}

/** Error codes from outside (the provider, the query string) shown only in a safe form. */
function safeCode(v: unknown): string {
  return typeof v === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(v) ? v : 'invalid_error';
}

function withTimeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LoginFailure('provider_timeout', `The provider did not answer ${what} in time.`)), UPSTREAM_TIMEOUT_MS);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Exchanges the code (PKCE, client credentials by HTTP Basic) and reads the profile. */
async function exchange(cfg: ProviderConfig, row: StateRow, code: string, timing: RequestTiming): Promise<ProviderProfile> {
  const { ArcticFetchError, OAuth2Client, OAuth2RequestError, UnexpectedErrorResponseBodyError, UnexpectedResponseError } = await arctic();
  const client = new OAuth2Client(cfg.clientId, cfg.clientSecret, row.redirect_uri);
  const started = performance.now();
  try {
    let data: Record<string, unknown>;
    try {
      const tokens = await withTimeout(client.validateAuthorizationCode(cfg.endpoints.token, code, row.code_verifier), 'the code exchange');
      data = tokens.data as Record<string, unknown>;
    } catch (e) {
      if (e instanceof LoginFailure) throw e;
      if (e instanceof OAuth2RequestError) throw new LoginFailure('token_exchange_failed', `${cfg.def.name} refused the code (${safeCode(e.code)}).`);
      if (e instanceof UnexpectedResponseError || e instanceof UnexpectedErrorResponseBodyError) {
        throw new LoginFailure('token_exchange_failed', `${cfg.def.name}'s token endpoint answered ${e.status}.`);
      }
      if (e instanceof ArcticFetchError) throw new LoginFailure('provider_unreachable', `Could not reach ${cfg.def.name}'s token endpoint.`);
      throw new LoginFailure('token_exchange_failed', `${cfg.def.name}'s token endpoint sent an unreadable answer.`);
    }
    // GitHub answers token errors with HTTP 200 and an `error` field.
    if ('error' in data) throw new LoginFailure('token_exchange_failed', `${cfg.def.name} refused the code (${safeCode(data.error)}).`);
    const accessToken = data.access_token;
    if (typeof accessToken !== 'string' || accessToken === '') {
      throw new LoginFailure('token_exchange_failed', `${cfg.def.name} sent no access token.`);
    }
    return await cfg.def.fetchProfile(accessToken, cfg.endpoints, AbortSignal.timeout(UPSTREAM_TIMEOUT_MS));
  } finally {
    timing.upstreamMs += performance.now() - started;
  }
}

const MESSAGES: Record<string, string> = {
  access_denied: 'The sign-in was cancelled or refused at the provider.',
  missing_code: 'The provider sent no authorization code.',
  provider_mismatch: 'The answer came from another provider than the one this sign-in was started with.',
  provider_not_configured: 'This login provider is no longer configured.',
  city_unavailable: 'The app you are signing in to is paused or no longer exists.',
  token_exchange_failed: 'The provider did not accept the sign-in code.',
  provider_unreachable: 'The provider could not be reached.',
  provider_timeout: 'The provider did not answer in time.',
  profile_fetch_failed: 'The provider did not send the account’s profile.',
};

export async function handleCallback(gw: GatewayContext, req: Request, timing: RequestTiming, hooks: Hooks): Promise<Response> {
  // A HEAD (link checkers, prefetchers) must not spend the single-use state.
  if (req.method === 'HEAD') return new Response(null, { status: 200, headers: { ...PAGE_HEADERS, 'content-type': 'text/html; charset=utf-8' } });
  const q = new URL(req.url).searchParams;
  const state = q.get('state');
  if (!state || state.length > 512) {
    return resultPage({ status: 400, ok: false, title: 'Sign-in failed', message: 'This sign-in link has no valid state. Start the sign-in again from the app.', code: 'missing_state' });
  }
  const hash = await sha256Hex(state);
  const row = await claimState(gw.db, hash);
  if (!row) {
    const seen = await getState(gw.db, hash);
    if (!seen) {
      return resultPage({ status: 400, ok: false, title: 'Sign-in failed', message: 'This sign-in link is unknown or has expired. Start the sign-in again from the app.', code: 'unknown_state' });
    }
    if (seen.status === 'pending') {
      return resultPage({ status: 400, ok: false, title: 'Sign-in expired', message: 'This sign-in link has expired. Start the sign-in again from the app.', code: 'state_expired' });
    }
    return resultPage({ status: 409, ok: false, title: 'Sign-in link already used', message: 'This sign-in link was already used; it works only once. Start the sign-in again from the app if you are not signed in.', code: 'state_already_used' });
  }

  const keep = stateTtlMs(gw);
  const def = PROVIDERS[row.provider as ProviderId];
  const fail = async (code: string, message: string, status: number) => {
    await finishState(gw.db, hash, { error: code }, keep);
    gw.log('warn', 'oauth login failed', { provider: row.provider, city: row.city_id, error: code });
    return answer(gw, req, row, state, { ok: false, code, message, status });
  };

  const providerError = q.get('error');
  if (providerError !== null) {
    const code = safeCode(providerError);
    return fail(code, MESSAGES[code] ?? `${def?.name ?? 'The provider'} refused the sign-in.`, 400);
  }
  const cfg = def ? providerConfig(gw.env, def) : null;
  if (!cfg) return fail('provider_not_configured', MESSAGES.provider_not_configured, 400);
  // RFC 9207: when the provider names itself, it must be the one this state was started with.
  const iss = q.get('iss');
  if (iss !== null && originOf(iss) !== cfg.issuerOrigin) return fail('provider_mismatch', MESSAGES.provider_mismatch, 400);
  const code = q.get('code');
  if (!code) return fail('missing_code', MESSAGES.missing_code, 400);
  if ((await gw.cities.get(row.city_id)) !== 'active') return fail('city_unavailable', MESSAGES.city_unavailable, 403);

  let profile: ProviderProfile;
  try {
    profile = await exchange(cfg, row, code, timing);
  } catch (e) {
    if (e instanceof LoginFailure) return fail(e.code, e.message, 502);
    throw e;
  }
  const { userId, created } = await findOrCreateOAuthUser(gw.db, row.city_id, profile, linkByEmail(gw));
  if (created) await hooks.userCreated({ city_id: row.city_id, user_id: userId, via: profile.provider, created_at: Date.now() });
  await finishState(gw.db, hash, { userId }, keep);
  gw.log('info', 'oauth login', { provider: row.provider, city: row.city_id, user: userId, created });
  return answer(gw, req, row, state, { ok: true, status: 200, code: '', message: 'You are signed in. You can close this window and return to the app.' });
}

/** ACCOUNTS_LINK_VERIFIED_EMAILS (default true): a provider-verified email joins the city's user with that verified email. */
function linkByEmail(gw: GatewayContext): boolean {
  return !/^(false|0|no|off)$/i.test(gw.env.get('ACCOUNTS_LINK_VERIFIED_EMAILS') ?? 'true');
}

/** Redirects to return_to when it is (still) allowed, else answers the HTML page. */
function answer(gw: GatewayContext, req: Request, row: StateRow, state: string, a: { ok: boolean; code: string; message: string; status: number }): Response {
  const back = row.return_to ? returnToAllowed(gw, req, row.return_to) : null;
  if (back) {
    back.searchParams.set('oauth_state', state);
    back.searchParams.set('oauth_status', a.ok ? 'done' : 'failed');
    if (!a.ok) back.searchParams.set('oauth_error', a.code);
    return new Response(null, { status: 303, headers: { ...PAGE_HEADERS, location: back.toString() } });
  }
  return a.ok
    ? resultPage({ status: 200, ok: true, title: 'Signed in', message: a.message })
    : resultPage({ status: a.status, ok: false, title: 'Sign-in failed', message: a.message, code: a.code });
}

export type LoginResult =
  | { status: 'pending' }
  | ({ status: 'done' } & IssuedToken)
  | { status: 'failed'; error: string; message: string };

/** The result of a login: pending, done (the token, handed out once) or failed. */
export async function readResult(gw: GatewayContext, state: string): Promise<LoginResult> {
  const hash = await sha256Hex(state);
  const row = await getState(gw.db, hash);
  if (!row || row.expires_at <= Date.now()) throw notFound('state_not_found', 'No login with this state, or it has expired.', 'state');
  switch (row.status) {
    case 'pending':
    case 'exchanging':
      return { status: 'pending' };
    case 'failed':
      return { status: 'failed', error: row.error ?? 'failed', message: MESSAGES[row.error ?? ''] ?? 'The sign-in did not complete.' };
    case 'delivered':
      throw new GatewayError(410, 'result_already_delivered', 'The token of this login was already handed out; it is given once.', { param: 'state' });
    case 'done': {
      const city = await gw.cities.get(row.city_id);
      if (city === 'paused') throw forbidden('city_paused', 'This city is paused.');
      if (city !== 'active') throw notFound('city_not_found', `No city '${row.city_id}'.`);
      if (!(await deliverState(gw.db, hash))) {
        throw new GatewayError(410, 'result_already_delivered', 'The token of this login was already handed out; it is given once.', { param: 'state' });
      }
      return { status: 'done', ...(await issueUserToken(gw, { city_id: row.city_id, user_id: row.user_id!, ttl: tokenTtlSeconds(gw) })) };
    }
  }
}
