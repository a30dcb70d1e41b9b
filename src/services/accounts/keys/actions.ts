// accounts/keys/create|list|update|revoke: users' API keys (issue 33). A user manages their own
// keys (signed in: a key cannot make, change or revoke keys — a limited key could otherwise
// lift its own limits); a bureau its city's users' keys; the admin everyone's. The secret is
// answered once, by create; only its hash is stored (kernel/user-keys.ts verifies it).
import type { GatewayContext } from '../../../kernel/context.ts';
import { decodeKeyCursor, encodeKeyCursor } from '../../../kernel/cursor.ts';
import { badRequest, conflict, forbidden, notFound } from '../../../kernel/errors.ts';
import type { Identity } from '../../../kernel/identity.ts';
import { action } from '../../../kernel/service.ts';
import { newUserKey } from '../../../kernel/user-keys.ts';
import { requireCity } from '../../cities/index.ts';
import { ACCOUNTS, type AccountsCapability } from '../capability.ts';
import { createdAnswer, createInput, keyAnswer, listAnswer, listInput, MAX_KEYS_PER_USER, revokeInput, updateInput } from './schemas.ts';
import { activeKeyCount, getKey, insertKey, listKeys, revokeKey, updateKey, type KeyCursor, type KeyFields, type KeyRow } from './store.ts';
import { keyViews } from './view.ts';

const AUTH: ('user' | 'bureau' | 'admin')[] = ['user', 'bureau', 'admin'];

/** A key cannot manage keys: managing them takes a login token (or a bureau or the admin). */
function notByKey(identity: Identity): void {
  if (identity.kind === 'user' && identity.keyId !== undefined) {
    throw forbidden('key_not_allowed', 'An API key cannot manage API keys: sign in (a user token), or ask the city’s backend.');
  }
}

/** The user whose keys a caller names: a user themself; a bureau (user_id) in its city; the admin (city_id + user_id). */
function ownerOf(identity: Identity, input: { city_id?: string; user_id?: string }): { cityId: string; userId: string } {
  if (identity.kind === 'user') {
    if (input.user_id !== undefined && input.user_id !== identity.userId) throw forbidden('user_mismatch', 'A user manages only their own keys.');
    return { cityId: identity.cityId, userId: identity.userId };
  }
  const cityId = identity.kind === 'bureau' ? identity.cityId : input.city_id;
  if (cityId === undefined) throw badRequest('invalid_input', 'city_id: required for the admin', 'city_id');
  if (input.user_id === undefined) throw badRequest('invalid_input', 'user_id: required for a bureau or the admin', 'user_id');
  return { cityId, userId: input.user_id };
}

/** A key the caller may manage, or 404 (never telling another city's keys apart from none). */
async function ownedKey(gw: GatewayContext, identity: Identity, id: string): Promise<KeyRow> {
  const row = await getKey(gw.db, id);
  const mine =
    row &&
    (identity.kind === 'admin' ||
      (identity.kind === 'bureau' && row.city_id === identity.cityId) ||
      (identity.kind === 'user' && row.city_id === identity.cityId && row.user_id === identity.userId));
  if (!mine) throw notFound('key_not_found', `No key '${id}'.`, 'id');
  return row;
}

function fieldsOf(input: KeyFields): KeyFields {
  const f: KeyFields = {};
  if (input.name !== undefined) f.name = input.name;
  if (input.models !== undefined) f.models = input.models === null ? null : [...new Set(input.models)];
  if (input.budget !== undefined) f.budget = input.budget;
  if (input.expires_at !== undefined) f.expires_at = input.expires_at;
  if (input.allowed_ips !== undefined) f.allowed_ips = input.allowed_ips === null ? null : [...new Set(input.allowed_ips)];
  if (input.rpm !== undefined) f.rpm = input.rpm;
  return f;
}

function decodeCursor(s: string): KeyCursor {
  const [created_at, key_id] = decodeKeyCursor(s) ?? [];
  if (typeof created_at === 'number' && typeof key_id === 'string') return { created_at, key_id };
  throw badRequest('invalid_cursor', 'cursor is not one this list returned.', 'cursor');
}

export const keyActions = {
  'keys/create': action({
    method: 'POST',
    auth: AUTH,
    summary: 'Make an API key for a user (the secret is answered here only)',
    description:
      'A user makes their own keys (with a login token: a key cannot make keys); a bureau for its city’s users (`user_id`); the admin for anyone (`city_id` + `user_id`). The key acts as its user on every API (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key`), within the city’s and the user’s limits and the key’s own.',
    input: createInput,
    output: createdAnswer,
    errors: [409],
    handler: async ({ gateway, identity, input }) => {
      notByKey(identity);
      const { cityId, userId } = ownerOf(identity, input);
      const city = await requireCity(gateway, cityId, identity);
      if (city.status !== 'active') throw forbidden('city_paused', 'This city is paused.');
      if ((await activeKeyCount(gateway.db, cityId, userId)) >= MAX_KEYS_PER_USER) {
        throw conflict('too_many_keys', `A user holds at most ${MAX_KEYS_PER_USER} active keys: revoke one first.`);
      }
      if (identity.kind !== 'user') await gateway.use<AccountsCapability>(ACCOUNTS)?.registerUser({ city_id: cityId, user_id: userId, via: 'token' });
      const made = await newUserKey();
      const row = await insertKey(gateway.db, { id: made.id, hash: made.hash, cityId, userId, fields: { ...fieldsOf(input), name: input.name } });
      gateway.userKeys.changed(made.id); // a process that looked the id up before knows it now
      const [key] = await keyViews(gateway, [row]);
      return new Response(JSON.stringify({ key, secret: made.secret }), {
        headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
      });
    },
  }),
  'keys/list': action({
    method: 'POST',
    auth: AUTH,
    summary: 'API keys, newest first: a user’s own, a bureau’s city’s (by user_id or all), the admin’s (by city_id, user_id or all)',
    input: listInput,
    output: listAnswer,
    handler: async ({ gateway, identity, input }) => {
      notByKey(identity);
      let cityId: string | undefined;
      let userId: string | undefined;
      if (identity.kind === 'user') ({ cityId, userId } = ownerOf(identity, input));
      else {
        cityId = identity.kind === 'bureau' ? identity.cityId : input.city_id;
        userId = input.user_id;
        if (userId !== undefined && cityId === undefined) throw badRequest('invalid_input', 'city_id: required with user_id', 'city_id');
      }
      if (cityId !== undefined && identity.kind === 'admin') await requireCity(gateway, cityId, identity);
      const now = Date.now();
      const items = [];
      let after = input.cursor ? decodeCursor(input.cursor) : undefined;
      let more = false;
      // a status filter is applied to each page read (expired is a matter of the clock)
      for (let pages = 0; items.length < input.limit && pages < 20; pages++) {
        const rows = await listKeys(gateway.db, { cityId, userId, after, limit: input.limit + 1 });
        more = rows.length > input.limit;
        const page = more ? rows.slice(0, input.limit) : rows;
        for (const r of page) {
          if (items.length === input.limit) {
            more = true;
            break;
          }
          after = { created_at: Number(r.created_at), key_id: r.key_id };
          const status = r.status === 'revoked' ? 'revoked' : r.expires_at != null && Number(r.expires_at) <= now ? 'expired' : 'active';
          if (!input.status || input.status === status) items.push(r);
        }
        if (!more) break;
      }
      return { items: await keyViews(gateway, items), next_cursor: more && after ? encodeKeyCursor([after.created_at, after.key_id]) : null };
    },
  }),
  'keys/update': action({
    method: 'POST',
    auth: AUTH,
    summary: 'Change a key’s name or limits (null clears a limit); every process applies it within 2 s',
    input: updateInput,
    output: keyAnswer,
    handler: async ({ gateway, identity, input }) => {
      notByKey(identity);
      const row = await ownedKey(gateway, identity, input.id);
      if (row.status === 'revoked') throw conflict('key_revoked', 'This key is revoked: make a new one.', 'id');
      const updated = (await updateKey(gateway.db, row.key_id, fieldsOf(input))) ?? row;
      gateway.userKeys.changed(row.key_id);
      const [key] = await keyViews(gateway, [updated]);
      return { key };
    },
  }),
  'keys/revoke': action({
    method: 'POST',
    auth: AUTH,
    summary: 'Revoke a key: refused at once here and within 2 s on every process and replica',
    input: revokeInput,
    output: keyAnswer,
    handler: async ({ gateway, identity, input }) => {
      notByKey(identity);
      const row = await ownedKey(gateway, identity, input.id);
      const revoked = (await revokeKey(gateway.db, row.key_id)) ?? row;
      gateway.userKeys.changed(row.key_id);
      const [key] = await keyViews(gateway, [revoked]);
      return { key };
    },
  }),
};
