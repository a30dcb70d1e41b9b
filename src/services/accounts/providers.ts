// The identity providers: slot A = GitHub (or GitHub Enterprise), slot B = Google. Each is a
// plain description (endpoints, scopes, how to read the profile); oauth.ts drives them all
// through arctic's generic OAuth2Client with PKCE.
import type { RuntimeEnv } from '../../kernel/runtime-env.ts';
import type { ProviderProfile } from './store.ts';

export type ProviderId = 'github' | 'google';

export interface Endpoints {
  authorize: string;
  token: string;
  /** GitHub: the REST API base; Google: the userinfo endpoint. */
  profile: string;
}

export interface ProviderDef {
  id: ProviderId;
  slot: 'A' | 'B';
  name: string;
  scopes: string[];
  /** Env keys that override the endpoints, with their defaults. */
  endpointKeys: { authorize: [string, string]; token: [string, string]; profile: [string, string] };
  fetchProfile(accessToken: string, endpoints: Endpoints, signal: AbortSignal): Promise<ProviderProfile>;
}

/** A login that cannot complete; `code` is shown to users and stored as the result's error. */
export class LoginFailure extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

async function getJson(url: string, headers: Record<string, string>, signal: AbortSignal, what: string): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, { headers, signal });
  } catch {
    throw new LoginFailure('provider_unreachable', `Could not reach the provider for ${what}.`);
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new LoginFailure('profile_fetch_failed', `The provider answered ${res.status} for ${what}.`);
  }
  try {
    return await res.json();
  } catch {
    throw new LoginFailure('profile_fetch_failed', `The provider sent an unreadable ${what}.`);
  }
}

export const github: ProviderDef = {
  id: 'github',
  slot: 'A',
  name: 'GitHub',
  scopes: ['read:user', 'user:email'],
  endpointKeys: {
    authorize: ['OAUTH_A_AUTHORIZE_URL', 'https://github.com/login/oauth/authorize'],
    token: ['OAUTH_A_TOKEN_URL', 'https://github.com/login/oauth/access_token'],
    profile: ['OAUTH_A_API_URL', 'https://api.github.com'],
  },
  async fetchProfile(accessToken, endpoints, signal) {
    const api = endpoints.profile.replace(/\/+$/, '');
    // GitHub's API refuses requests without a User-Agent.
    const headers = {
      authorization: `Bearer ${accessToken}`,
      accept: 'application/vnd.github+json',
      'user-agent': 'citygate',
      'x-github-api-version': '2022-11-28',
    };
    const user = (await getJson(`${api}/user`, headers, signal, 'the user')) as Record<string, unknown>;
    const id = user.id;
    if ((typeof id !== 'number' && typeof id !== 'string') || String(id) === '') {
      throw new LoginFailure('profile_fetch_failed', 'The provider sent a user without an id.');
    }
    // The account's email: the primary one from /user/emails, verified or not (scope user:email).
    // /user shows only a public email, and says nothing of verification.
    let email: string | null = null;
    let emailVerified = false;
    try {
      const emails = (await getJson(`${api}/user/emails`, headers, signal, 'the emails')) as unknown;
      if (Array.isArray(emails)) {
        const list = emails as { email?: unknown; primary?: unknown; verified?: unknown }[];
        const pick = list.find((e) => e.primary === true && e.verified === true) ?? list.find((e) => e.primary === true);
        if (pick && str(pick.email)) {
          email = pick.email as string;
          emailVerified = pick.verified === true;
        }
      }
    } catch {
      // No email access (scope declined or an older GitHub Enterprise): fall back below.
    }
    if (!email && str(user.email)) email = user.email as string; // public email; verification unknown
    return {
      provider: 'github',
      providerUserId: String(id),
      username: str(user.login),
      name: str(user.name) ?? str(user.login),
      email,
      emailVerified,
      avatarUrl: str(user.avatar_url),
    };
  },
};

export const google: ProviderDef = {
  id: 'google',
  slot: 'B',
  name: 'Google',
  scopes: ['openid', 'email', 'profile'],
  endpointKeys: {
    authorize: ['OAUTH_B_AUTHORIZE_URL', 'https://accounts.google.com/o/oauth2/v2/auth'],
    token: ['OAUTH_B_TOKEN_URL', 'https://oauth2.googleapis.com/token'],
    profile: ['OAUTH_B_USERINFO_URL', 'https://openidconnect.googleapis.com/v1/userinfo'],
  },
  async fetchProfile(accessToken, endpoints, signal) {
    const info = (await getJson(endpoints.profile, { authorization: `Bearer ${accessToken}`, accept: 'application/json' }, signal, 'the user')) as Record<
      string,
      unknown
    >;
    const sub = str(info.sub);
    if (!sub) throw new LoginFailure('profile_fetch_failed', 'The provider sent a user without an id.');
    const email = str(info.email);
    return {
      provider: 'google',
      providerUserId: sub,
      username: email,
      name: str(info.name),
      email,
      emailVerified: email !== null && (info.email_verified === true || info.email_verified === 'true'),
      avatarUrl: str(info.picture),
    };
  },
};

export const PROVIDERS: Record<ProviderId, ProviderDef> = { github, google };

export interface ProviderConfig {
  def: ProviderDef;
  clientId: string;
  clientSecret: string;
  endpoints: Endpoints;
  /**
   * The origin a callback's RFC 9207 `iss` parameter must have when the provider sends one:
   * OAUTH_{A,B}_ISSUER's, else the authorize endpoint's (github.com, accounts.google.com).
   */
  issuerOrigin: string;
}

/** The provider's configuration now, or null when its client id or secret is missing. */
export function providerConfig(env: RuntimeEnv, def: ProviderDef): ProviderConfig | null {
  const clientId = env.get(`OAUTH_${def.slot}_CLIENT_ID`);
  const clientSecret = env.get(`OAUTH_${def.slot}_CLIENT_SECRET`);
  if (!clientId || !clientSecret) return null;
  const pick = ([key, fallback]: [string, string]) => env.get(key) ?? fallback;
  const endpoints = { authorize: pick(def.endpointKeys.authorize), token: pick(def.endpointKeys.token), profile: pick(def.endpointKeys.profile) };
  return { def, clientId, clientSecret, endpoints, issuerOrigin: originOf(env.get(`OAUTH_${def.slot}_ISSUER`) ?? endpoints.authorize) };
}

export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '';
  }
}
