// accounts: the users of each city and how they sign in — the credential-free local login
// (development; off when LOCAL_LOGIN=false) and OAuth login with provider A (GitHub) and
// provider B (Google). The product's front end starts a login, the user signs in at the
// provider, the provider returns to the fixed callback, and the front end polls the result
// for a user token bound to its city. See docs/accounts.md.
import { z } from 'zod';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import { decodeKeyCursor, encodeKeyCursor } from '../../kernel/cursor.ts';
import { badRequest, forbidden } from '../../kernel/errors.ts';
import { boundCity } from '../../kernel/identity.ts';
import { action, defineService, pageQuery } from '../../kernel/service.ts';
import { cityIdSchema, requireCity } from '../cities/index.ts';
import { issueUserToken, userIdSchema } from '../cities/tokens.ts';
import { ACCOUNTS, type AccountsCapability } from './capability.ts';
import { keyActions } from './keys/actions.ts';
import { logoutAction } from './logout.ts';
import { CALLBACK_PATH, callbackUrl, handleCallback, readResult, startLogin } from './oauth.ts';
import { PROVIDERS, providerConfig } from './providers.ts';
import { createHooks, localLoginEnabled, tokenTtlSeconds, type Hooks } from './settings.ts';
import { ensureUser, getUser, identitiesOf, listUsers, toIdentity, toUser, type UserCursor } from './store.ts';
import { publicOriginOrNull } from '../../kernel/public-url.ts';

const hooksByGateway = new WeakMap<GatewayContext, ReturnType<typeof createHooks>>();
function hooksOf(gw: GatewayContext): Hooks {
  let h = hooksByGateway.get(gw);
  if (!h) hooksByGateway.set(gw, (h = createHooks(() => gw)));
  return h;
}

/** Answers JSON that must never be cached (it carries a user token). */
function noStore(body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
  });
}

function encodeCursor(c: UserCursor): string {
  return encodeKeyCursor([c.created_at, c.city_id, c.user_id]);
}

function decodeCursor(s: string): UserCursor {
  const [created_at, city_id, user_id] = decodeKeyCursor(s) ?? [];
  if (typeof created_at === 'number' && typeof city_id === 'string' && typeof user_id === 'string') return { created_at, city_id, user_id };
  throw badRequest('invalid_cursor', 'cursor is not one this list returned.', 'cursor');
}

const providerIds = Object.keys(PROVIDERS) as [keyof typeof PROVIDERS, ...(keyof typeof PROVIDERS)[]];

// Answers of the actions that reply with a no-store Response (documented and typed from here).
const issuedToken = z.object({ user_token: z.string(), city_id: z.string(), user_id: z.string(), expires_at: z.iso.datetime() });
const oauthStarted = z.object({ state: z.string(), url: z.url(), provider: z.enum(providerIds), city_id: z.string(), expires_at: z.iso.datetime() });
const loginResult = z.discriminatedUnion('status', [
  z.object({ status: z.literal('pending') }),
  issuedToken.extend({ status: z.literal('done') }),
  z.object({ status: z.literal('failed'), error: z.string(), message: z.string() }),
]);

export const accountsService = defineService({
  id: 'accounts',
  name: 'Accounts',
  description: 'Users of each city, local login for development, and OAuth login with GitHub (A) and Google (B).',
  env: [
    { key: 'OAUTH_A_CLIENT_ID', description: 'GitHub OAuth app client id (provider A).', required: false },
    { key: 'OAUTH_A_CLIENT_SECRET', description: 'GitHub OAuth app client secret (provider A).', required: false },
    { key: 'OAUTH_B_CLIENT_ID', description: 'Google OAuth client id (provider B).', required: false },
    { key: 'OAUTH_B_CLIENT_SECRET', description: 'Google OAuth client secret (provider B).', required: false },
    { key: 'OAUTH_ALLOWED_RETURN_ORIGINS', description: 'Comma-separated origins return_to may point at, besides the public URL’s.', required: false },
    { key: 'GATEWAY_CITY_BASE_URL', description: 'Public URL; its origin makes the OAuth callback URL.', required: false },
  ],
  init(gw) {
    const hooks = hooksOf(gw) as ReturnType<typeof createHooks>;
    const capability: AccountsCapability = {
      async registerUser(a) {
        const created = await ensureUser(gw.db, { cityId: a.city_id, userId: a.user_id, via: a.via });
        if (created) await hooks.userCreated({ city_id: a.city_id, user_id: a.user_id, via: a.via, created_at: Date.now() });
        return created;
      },
      onUserCreated(listener) {
        hooks.listeners.push(listener);
      },
    };
    gw.provide(ACCOUNTS, capability);
  },
  actions: {
    providers: action({
      method: 'GET',
      auth: [],
      summary: 'The login methods enabled now',
      handler: ({ gateway, request }) => ({
        items: [
          ...(localLoginEnabled(gateway) ? [{ id: 'local', name: 'Local login', type: 'local' }] : []),
          ...Object.values(PROVIDERS)
            .filter((p) => providerConfig(gateway.env, p))
            .map((p) => ({ id: p.id, name: p.name, type: 'oauth', slot: p.slot })),
        ],
        callback_url: publicOriginOrNull(gateway, request) === null ? null : callbackUrl(gateway, request),
      }),
    }),
    login: action({
      method: 'POST',
      auth: [],
      ipLimited: true,
      summary: 'Credential-free local login (development; 403 when LOCAL_LOGIN=false)',
      input: z.object({
        city_id: cityIdSchema,
        user_id: userIdSchema.optional().describe('omit to create a new user'),
        name: z.string().trim().min(1).max(200).optional(),
      }),
      output: issuedToken,
      handler: async ({ gateway, input }) => {
        if (!localLoginEnabled(gateway)) throw forbidden('local_login_disabled', 'Local login is disabled on this gateway (LOCAL_LOGIN=false).');
        const city = await requireCity(gateway, input.city_id);
        if (city.status === 'paused') throw forbidden('city_paused', 'This city is paused.');
        // A user who has signed in through an OAuth provider is that person's account: local
        // login never signs in as them (it would hand their credits to anyone on this port).
        if (input.user_id && (await identitiesOf(gateway.db, input.city_id, input.user_id)).length) {
          throw forbidden('oauth_user', 'This user signs in through an OAuth provider; local login cannot sign in as them.');
        }
        const userId = input.user_id ?? newId('usr', 12);
        const created = await ensureUser(gateway.db, { cityId: input.city_id, userId, via: 'local', name: input.name, login: true });
        if (created) await hooksOf(gateway).userCreated({ city_id: input.city_id, user_id: userId, via: 'local', created_at: Date.now() });
        return noStore(await issueUserToken(gateway, { city_id: input.city_id, user_id: userId, ttl: tokenTtlSeconds(gateway) }));
      },
    }),
    'oauth/start': action({
      method: 'POST',
      auth: [],
      ipLimited: true,
      summary: 'Start an OAuth login: answers the state to poll and the URL to send the user to',
      input: z.object({
        city_id: cityIdSchema,
        provider: z.enum(providerIds),
        return_to: z.string().max(2048).optional(),
      }),
      output: oauthStarted,
      handler: async ({ gateway, input, request }) => noStore(await startLogin(gateway, request, input)),
    }),
    'oauth/callback': action({
      method: 'GET',
      auth: [],
      summary: `The fixed return URL registered with the providers (${CALLBACK_PATH}); answers an HTML page or redirects to return_to`,
      input: z.object({}).loose(),
      produces: ['text/html'],
      handler: ({ gateway, request, timing }) => handleCallback(gateway, request, timing, hooksOf(gateway)),
    }),
    'oauth/result': action({
      method: 'GET',
      auth: [],
      ipLimited: true,
      summary: 'Poll a login: pending, done (the user token, handed out once) or failed',
      input: z.object({ state: z.string().min(1).max(512) }),
      output: loginResult,
      errors: [410],
      handler: async ({ gateway, input }) => noStore(await readResult(gateway, input.state)),
    }),
    logout: logoutAction,
    me: action({
      method: 'GET',
      auth: ['user'],
      summary: 'The signed-in user’s profile',
      handler: async ({ gateway, identity }) => {
        if (identity.kind !== 'user') throw forbidden('identity_not_allowed', 'Only a user has a profile.');
        const row = await getUser(gateway.db, identity.cityId, identity.userId);
        const identities = await identitiesOf(gateway.db, identity.cityId, identity.userId);
        const base = row
          ? toUser(row)
          : { city_id: identity.cityId, user_id: identity.userId, name: null, email: null, email_verified: false, avatar_url: null, created_via: 'token', created_at: null, updated_at: null, last_login_at: null };
        return { ...base, identities: identities.map(toIdentity) };
      },
    }),
    users: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'A page of users (a bureau sees only its own city)',
      input: z.object({ city_id: cityIdSchema.optional(), ...pageQuery }),
      handler: async ({ gateway, input, identity }) => {
        const cityId = input.city_id ?? boundCity(identity) ?? undefined;
        if (cityId) await requireCity(gateway, cityId, identity);
        const rows = await listUsers(gateway.db, {
          cityId,
          after: input.cursor ? decodeCursor(input.cursor) : undefined,
          limit: input.limit + 1,
        });
        const more = rows.length > input.limit;
        const page = more ? rows.slice(0, input.limit) : rows;
        const last = page[page.length - 1];
        return { items: page.map(toUser), next_cursor: more && last ? encodeCursor(last) : null };
      },
    }),
    ...keyActions,
  },
});

export { ACCOUNTS, type AccountsCapability, type UserCreated } from './capability.ts';
