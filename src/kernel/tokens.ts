// User tokens: EdDSA (Ed25519) JWTs signed by a key ring kept in the database, so every
// process and isolate signs and verifies with the same keys and products' backends can
// verify offline through /.well-known/jwks.json.
import { SignJWT, exportJWK, generateKeyPair, importJWK, jwtVerify, errors as joseErrors, type JWK } from 'jose';
import type { Db } from '../db/database.ts';
import { isUniqueViolation } from '../db/database.ts';
import { randomToken } from './crypto.ts';
import { unauthorized } from './errors.ts';
import { MAX_TOKEN_LIFETIME_MS, Revocations } from './revocations.ts';

const ALG = 'EdDSA';
const ISSUER = 'citygate';
const CACHE_MAX = 20_000;

export interface UserClaims {
  cityId: string;
  userId: string;
  expiresAt: number; // epoch ms
  metadata?: Record<string, unknown>;
  /** The token's id (revocable by logout); absent only in tokens signed before it existed. */
  jti?: string;
  /** When it was signed, epoch ms. */
  issuedAt?: number;
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
  readonly revocations: Revocations;

  constructor(db: Db) {
    this.db = db;
    this.revocations = new Revocations(db);
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
    const now = Date.now();
    for (const r of rows) {
      // A retired key verifies until every token it signed has expired, then leaves the JWKS.
      if (r.status === 'retired' && r.retired_at != null && Number(r.retired_at) + MAX_TOKEN_LIFETIME_MS < now) continue;
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

  /**
   * Starts a new signing key (admin): one batch retires the active key and inserts the new
   * one. Other processes sign with the new key once they reload (within a minute); tokens of
   * every key keep verifying until they expire.
   */
  async rotate(): Promise<{ kid: string; retired: string[] }> {
    const { publicKey, privateKey } = await generateKeyPair(ALG, { crv: 'Ed25519', extractable: true });
    const kid = randomToken(12);
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: ALG, use: 'sig' };
    const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: ALG };
    const t = Date.now();
    const [retired] = await this.db.batch([
      this.db.kysely.updateTable('signing_keys').set({ status: 'retired', retired_at: t }).where('status', '=', 'active').returning('kid'),
      this.db.kysely.insertInto('signing_keys').values({
        kid,
        alg: ALG,
        private_jwk: JSON.stringify(privateJwk),
        public_jwk: JSON.stringify(publicJwk),
        status: 'active',
        created_at: t,
      }),
    ]);
    await this.load();
    return { kid, retired: retired.rows.map((r) => String(r.kid)) };
  }

  async sign(c: UserClaims): Promise<string> {
    // Another process may have rotated the key: pick the new one up within a minute.
    if (!this.#signer || Date.now() - this.#loadedAt > 60_000) await this.ensure();
    const signer = this.#signer!;
    const jwt = new SignJWT({ cid: c.cityId, iam: Date.now(), ...(c.metadata ? { md: c.metadata } : {}) })
      .setProtectedHeader({ alg: ALG, kid: signer.kid, typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject(c.userId)
      .setIssuedAt()
      .setJti(randomToken(9))
      .setExpirationTime(Math.floor(c.expiresAt / 1000));
    return jwt.sign(signer.key);
  }

  /**
   * Verifies a user token; verified tokens are cached until they expire, and every answer,
   * cached or not, is checked against the revocations (polled every 2 s at most).
   */
  verify(token: string): Promise<UserClaims> {
    // The common case — revocations polled recently, token verified before — without an await.
    if (!this.revocations.stale()) {
      const hit = this.#verified.get(token);
      if (hit && hit.expiresAt > Date.now() && !this.revocations.isRevoked(hit as UserClaims & { issuedAt: number })) return Promise.resolve(hit);
    }
    return this.#verify(token);
  }

  async #verify(token: string): Promise<UserClaims> {
    await this.revocations.fresh();
    const hit = this.#verified.get(token);
    if (hit) {
      if (hit.expiresAt <= Date.now()) {
        this.#verified.delete(token);
        throw unauthorized('token_expired', 'The user token has expired.');
      }
      if (this.revocations.isRevoked(hit as UserClaims & { issuedAt: number })) {
        this.#verified.delete(token);
        throw unauthorized('token_revoked', 'The user token has been revoked.');
      }
      return hit;
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
      jti: typeof payload.jti === 'string' ? payload.jti : undefined,
      // Milliseconds when present (revoke-then-issue within one second must work), else iat.
      issuedAt: typeof payload.iam === 'number' ? payload.iam : typeof payload.iat === 'number' ? payload.iat * 1000 : 0,
    };
    if (this.revocations.isRevoked(claims as UserClaims & { issuedAt: number })) throw unauthorized('token_revoked', 'The user token has been revoked.');
    if (this.#verified.size >= CACHE_MAX) this.#verified.delete(this.#verified.keys().next().value!);
    this.#verified.set(token, claims);
    return claims;
  }

  async #keyFor(kid: string | undefined): Promise<CryptoKey | Uint8Array> {
    if (!kid) throw new Error('no kid');
    // A key another process created since we loaded; reloads are rate-limited so forged
    // tokens with random kids cannot turn into database load.
    if (!this.#keys.has(kid) && Date.now() - this.#loadedAt > 1000) await this.load();
    const k = this.#keys.get(kid);
    if (!k) throw new Error('unknown kid');
    return k.verifyKey;
  }
}
