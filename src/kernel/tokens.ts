// User tokens: EdDSA (Ed25519) JWTs signed by a key ring kept in the database, so every
// process and isolate signs and verifies with the same keys and products' backends can
// verify offline through /.well-known/jwks.json.
import { SignJWT, exportJWK, generateKeyPair, importJWK, jwtVerify, errors as joseErrors, type JWK } from 'jose';
import type { Db } from '../db/database.ts';
import { isUniqueViolation } from '../db/database.ts';
import { randomToken } from './crypto.ts';
import { unauthorized } from './errors.ts';

const ALG = 'EdDSA';
const ISSUER = 'citygate';
const CACHE_MAX = 20_000;
const KEY_RELOAD_MS = 3000;

export interface UserClaims {
  cityId: string;
  userId: string;
  expiresAt: number; // epoch ms
  metadata?: Record<string, unknown>;
}

interface RingKey {
  kid: string;
  publicJwk: JWK;
  verifyKey: CryptoKey | Uint8Array;
}

export class KeyRing {
  readonly db: Db;
  #keys = new Map<string, RingKey>();
  #signer: { kid: string; key: CryptoKey | Uint8Array } | null = null;
  #verified = new Map<string, UserClaims>();
  #loadedAt = 0;

  constructor(db: Db) {
    this.db = db;
  }

  /** Creates the active signing key unless one exists; concurrent first boots converge on one. */
  async ensure(): Promise<void> {
    const active = await this.#activeRow();
    if (!active) {
      const { publicKey, privateKey } = await generateKeyPair(ALG, { crv: 'Ed25519', extractable: true });
      const kid = randomToken(12);
      const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: ALG, use: 'sig' };
      const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: ALG };
      try {
        await this.db.kysely
          .insertInto('signing_keys')
          .values({
            kid,
            alg: ALG,
            private_jwk: JSON.stringify(privateJwk),
            public_jwk: JSON.stringify(publicJwk),
            status: 'active',
            created_at: Date.now(),
          })
          .execute();
      } catch (e) {
        if (!isUniqueViolation(e)) throw e; // another process won the race: use its key
      }
    }
    await this.load();
  }

  async #activeRow() {
    return this.db.kysely.selectFrom('signing_keys').selectAll().where('status', '=', 'active').executeTakeFirst();
  }

  /** (Re)loads every key of the ring. */
  async load(): Promise<void> {
    const rows = await this.db.kysely.selectFrom('signing_keys').selectAll().execute();
    const keys = new Map<string, RingKey>();
    for (const r of rows) {
      const publicJwk = JSON.parse(r.public_jwk) as JWK;
      keys.set(r.kid, { kid: r.kid, publicJwk, verifyKey: await importJWK(publicJwk, ALG) });
      if (r.status === 'active') this.#signer = { kid: r.kid, key: await importJWK(JSON.parse(r.private_jwk), ALG) };
    }
    this.#keys = keys;
    this.#loadedAt = Date.now();
  }

  jwks(): { keys: JWK[] } {
    return { keys: [...this.#keys.values()].map((k) => k.publicJwk) };
  }

  async sign(c: UserClaims): Promise<string> {
    if (!this.#signer) await this.ensure();
    const signer = this.#signer!;
    const jwt = new SignJWT({ cid: c.cityId, ...(c.metadata ? { md: c.metadata } : {}) })
      .setProtectedHeader({ alg: ALG, kid: signer.kid, typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject(c.userId)
      .setIssuedAt()
      .setJti(randomToken(9))
      .setExpirationTime(Math.floor(c.expiresAt / 1000));
    return jwt.sign(signer.key);
  }

  /** Verifies a user token; verified tokens are cached until they expire. */
  async verify(token: string): Promise<UserClaims> {
    const hit = this.#verified.get(token);
    if (hit) {
      if (hit.expiresAt > Date.now()) return hit;
      this.#verified.delete(token);
      throw unauthorized('token_expired', 'The user token has expired.');
    }
    let payload;
    try {
      ({ payload } = await jwtVerify(token, (h) => this.#keyFor(h.kid), { issuer: ISSUER, algorithms: [ALG] }));
    } catch (e) {
      if (e instanceof joseErrors.JWTExpired) throw unauthorized('token_expired', 'The user token has expired.');
      throw unauthorized('invalid_token', 'The bearer token is not valid.');
    }
    if (typeof payload.cid !== 'string' || typeof payload.sub !== 'string' || typeof payload.exp !== 'number') {
      throw unauthorized('invalid_token', 'The bearer token is not valid.');
    }
    const claims: UserClaims = {
      cityId: payload.cid,
      userId: payload.sub,
      expiresAt: payload.exp * 1000,
      metadata: payload.md as Record<string, unknown> | undefined,
    };
    if (this.#verified.size >= CACHE_MAX) this.#verified.delete(this.#verified.keys().next().value!);
    this.#verified.set(token, claims);
    return claims;
  }

  async #keyFor(kid: string | undefined): Promise<CryptoKey | Uint8Array> {
    if (!kid) throw new Error('no kid');
    // A key another process created since we loaded; reloads are rate-limited (at most one per
    // KEY_RELOAD_MS, which bounds how stale the ring can be) so forged tokens with random kids
    // cannot turn into database load.
    if (!this.#keys.has(kid) && Date.now() - this.#loadedAt > KEY_RELOAD_MS) await this.load();
    const k = this.#keys.get(kid);
    if (!k) throw new Error('unknown kid');
    return k.verifyKey;
  }
}
