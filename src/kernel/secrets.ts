// Secrets at rest: values of secret env keys (*_KEY, *_SECRET, *_TOKEN, *_PASSWORD, but not
// GATEWAY_ADMIN_SECRET_KEY, which operators read with SQL) and upstream API keys are stored
// sealed with AES-256-GCM (WebCrypto, so Node and Workers alike) under one master key.
//
// Sealed form: `enc:v1:<fingerprint>:<iv>:<ciphertext+tag>` (base64url), with the env key's
// name as additional data, so a sealed value cannot be moved to another key. The fingerprint
// (a hash of the master key, not the key) names which master key sealed it.
import type { Db } from '../db/database.ts';
import { base64url, hex } from './crypto.ts';

const PREFIX = 'enc:v1:';
const CHECK_PLAINTEXT = 'citygate master key check';
const enc = new TextEncoder();
const dec = new TextDecoder();

/** Env keys whose values are sealed at rest. */
export function isSealedEnvKey(key: string): boolean {
  return /(_KEY|_SECRET|_TOKEN|_PASSWORD)$/.test(key) && key !== 'GATEWAY_ADMIN_SECRET_KEY';
}

export const isSealed = (v: string): boolean => v.startsWith(PREFIX);

/** The additional data an upstream's API key is sealed with: its row, so a key cannot be moved to another upstream. */
export const upstreamKeyLabel = (upstreamId: string): string => `ai_upstreams:${upstreamId}`;

export class MasterKeyError extends Error {}

function fromBase64url(s: string): Uint8Array<ArrayBuffer> {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(b.length);
  for (let i = 0; i < b.length; i++) out[i] = b.charCodeAt(i);
  return out;
}

/** 32 bytes from a master key written as 64 hex digits or base64/base64url. */
export function parseMasterKey(material: string): Uint8Array<ArrayBuffer> {
  const s = material.trim();
  let bytes: Uint8Array<ArrayBuffer> | null = null;
  if (/^[0-9a-fA-F]{64}$/.test(s)) bytes = Uint8Array.from(s.match(/../g)!.map((h) => parseInt(h, 16)));
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(s)) bytes = fromBase64url(s.replace(/=$/, ''));
  if (!bytes || bytes.length !== 32) {
    throw new MasterKeyError('CITYGATE_MASTER_KEY must be 32 random bytes, written as 64 hex digits or 43 base64url characters (e.g. `openssl rand -hex 32`).');
  }
  return bytes;
}

/** A fresh master key in the form parseMasterKey reads (base64url). */
export function generateMasterKey(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

export class SecretBox {
  readonly fingerprint: string;
  readonly #key: CryptoKey;

  private constructor(key: CryptoKey, fingerprint: string) {
    this.#key = key;
    this.fingerprint = fingerprint;
  }

  static async fromMaterial(material: string): Promise<SecretBox> {
    const raw = parseMasterKey(material);
    const fp = hex(await crypto.subtle.digest('SHA-256', raw)).slice(0, 16);
    const key = await crypto.subtle.importKey('raw', raw, { name: 'AES-GCM' }, false, ['encrypt', 'decrypt']);
    return new SecretBox(key, fp);
  }

  async seal(plain: string, label: string): Promise<string> {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const ct = await crypto.subtle.encrypt({ name: 'AES-GCM', iv, additionalData: enc.encode(label) }, this.#key, enc.encode(plain));
    return `${PREFIX}${this.fingerprint}:${base64url(iv)}:${base64url(new Uint8Array(ct))}`;
  }

  /** The plaintext of a sealed value; throws MasterKeyError when this key did not seal it. */
  async open(sealed: string, label: string): Promise<string> {
    const [fp, iv, ct] = sealed.slice(PREFIX.length).split(':');
    if (fp !== this.fingerprint) throw new MasterKeyError(`sealed under master key ${fp}, not ${this.fingerprint}`);
    try {
      const pt = await crypto.subtle.decrypt({ name: 'AES-GCM', iv: fromBase64url(iv), additionalData: enc.encode(label) }, this.#key, fromBase64url(ct));
      return dec.decode(pt);
    } catch {
      throw new MasterKeyError(`a value sealed under master key ${fp} does not open (damaged, or moved to another key)`);
    }
  }
}

/**
 * Boot check, before anything is sealed or opened: the first boot records a value sealed
 * under this master key; later boots must open it, else the gateway refuses to start —
 * having written nothing, so the right key still opens everything.
 */
export async function checkMasterKey(db: Db, box: SecretBox, where: string): Promise<void> {
  await db.kysely
    .insertInto('master_key_check')
    .values({ id: 'master', fingerprint: box.fingerprint, sealed: await box.seal(CHECK_PLAINTEXT, 'master_key_check'), created_at: Date.now() })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
  const row = await db.kysely.selectFrom('master_key_check').selectAll().where('id', '=', 'master').executeTakeFirstOrThrow();
  let ok = false;
  try {
    ok = (await box.open(row.sealed, 'master_key_check')) === CHECK_PLAINTEXT;
  } catch {
    ok = false;
  }
  if (!ok) {
    throw new MasterKeyError(
      `the master key (${where}; fingerprint ${box.fingerprint}) is not the one this database's secrets are sealed with (fingerprint ${row.fingerprint}). ` +
        'Refusing to start; nothing was changed. Start with the original CITYGATE_MASTER_KEY (or restore its key file). See docs/security.md.',
    );
  }
}

/** Refuses a database whose secrets are sealed when no master key is configured (edge without the secret). */
export async function checkNoSealedSecrets(db: Db): Promise<void> {
  const row = await db.kysely.selectFrom('master_key_check').select('fingerprint').where('id', '=', 'master').executeTakeFirst();
  if (row) {
    throw new MasterKeyError(
      `this database's secrets are sealed under master key ${row.fingerprint}, but CITYGATE_MASTER_KEY is not set. Refusing to start; nothing was changed. See docs/security.md.`,
    );
  }
}

/**
 * The forward migration of secrets at rest: seals every secret env value still stored in
 * clear. Each update is guarded by the old value, so boots running at once cannot clash.
 */
export async function sealStoredEnv(db: Db, box: SecretBox): Promise<number> {
  const rows = await db.kysely.selectFrom('env').select(['key', 'value']).execute();
  let n = 0;
  for (const r of rows) {
    if (!isSealedEnvKey(r.key) || isSealed(r.value) || r.value === '') continue;
    await db.kysely
      .updateTable('env')
      .set({ value: await box.seal(r.value, `env:${r.key}`) })
      .where('key', '=', r.key)
      .where('value', '=', r.value)
      .execute();
    n++;
  }
  return n;
}

/**
 * The same forward migration for upstream API keys (ai_upstreams.api_key): seals every key
 * still stored in clear, each update guarded by the old value.
 */
export async function sealStoredUpstreamKeys(db: Db, box: SecretBox): Promise<number> {
  const rows = await db.kysely.selectFrom('ai_upstreams').select(['upstream_id', 'api_key']).where('api_key', 'is not', null).execute();
  let n = 0;
  for (const r of rows) {
    if (!r.api_key || isSealed(r.api_key)) continue;
    await db.kysely
      .updateTable('ai_upstreams')
      .set({ api_key: await box.seal(r.api_key, upstreamKeyLabel(r.upstream_id)) })
      .where('upstream_id', '=', r.upstream_id)
      .where('api_key', '=', r.api_key)
      .execute();
    n++;
  }
  return n;
}
