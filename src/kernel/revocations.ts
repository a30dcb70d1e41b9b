// Token revocation: logout revokes one token (its jti); an admin or the city's bureau
// revokes every token of a user issued before a moment. Each process keeps the revocations
// in memory and polls the table for new rows at most every `ttlMs`, before it verifies a
// token, so a revocation reaches every process and replica within ttlMs (2 s) of being
// written — and the verified-token cache, consulted before this check, cannot outlive it.
import type { Db } from '../db/database.ts';
import { newId } from './crypto.ts';

/** Rows are polled with this overlap, so a row committed late (another replica's clock) is not missed. */
const OVERLAP_MS = 30_000;
/** The longest a user token lives (cities/tokens/apply allows 30 days). */
export const MAX_TOKEN_LIFETIME_MS = 30 * 86_400_000;

export interface RevocableClaims {
  cityId: string;
  userId: string;
  jti?: string;
  /** When the token was signed, epoch ms. */
  issuedAt: number;
  expiresAt: number;
}

export class Revocations {
  readonly db: Db;
  readonly ttlMs: number;
  /** jti → expiry (ms): revoked single tokens, dropped once they would have expired anyway. */
  #tokens = new Map<string, number>();
  /** city\0user → tokens issued before this moment (ms) are revoked. */
  #users = new Map<string, number>();
  #polledAt = 0;
  #cursor = 0;
  #loading: Promise<void> | null = null;

  constructor(db: Db, ttlMs = 2000) {
    this.db = db;
    this.ttlMs = ttlMs;
  }

  /** Polls for new revocations when the last poll is older than ttlMs (one small indexed SELECT). */
  async fresh(): Promise<void> {
    if (this.stale()) await this.poll();
  }

  /** Whether fresh() would poll now. */
  stale(): boolean {
    return Date.now() - this.#polledAt > this.ttlMs;
  }

  poll(): Promise<void> {
    this.#loading ??= (async () => {
      try {
        const started = Date.now();
        // First poll: every revocation that can still matter; later: what is new since.
        const since = this.#cursor === 0 ? started - MAX_TOKEN_LIFETIME_MS : this.#cursor - OVERLAP_MS;
        const rows = await this.db.kysely
          .selectFrom('revocations')
          .select(['kind', 'jti', 'city_id', 'user_id', 'before_ms', 'expires_at', 'created_at'])
          .where('created_at', '>=', since)
          .where('expires_at', '>', started)
          .execute();
        for (const r of rows) this.#remember(r);
        this.#cursor = started;
        this.#polledAt = started;
        this.#prune(started);
      } finally {
        this.#loading = null;
      }
    })();
    return this.#loading;
  }

  #remember(r: { kind: string; jti: string | null; city_id: string | null; user_id: string | null; before_ms: number | null; expires_at: number }) {
    if (r.kind === 'token' && r.jti) this.#tokens.set(r.jti, Number(r.expires_at));
    if (r.kind === 'user' && r.city_id && r.user_id && r.before_ms != null) {
      const k = `${r.city_id}\0${r.user_id}`;
      this.#users.set(k, Math.max(this.#users.get(k) ?? 0, Number(r.before_ms)));
    }
  }

  #prune(now: number) {
    for (const [jti, exp] of this.#tokens) if (exp <= now) this.#tokens.delete(jti);
    for (const [k, before] of this.#users) if (before + MAX_TOKEN_LIFETIME_MS <= now) this.#users.delete(k);
  }

  /** True when the token was revoked (memory only: call fresh() first). */
  isRevoked(c: RevocableClaims): boolean {
    if (c.jti && this.#tokens.has(c.jti)) return true;
    if (this.#users.size === 0) return false;
    const before = this.#users.get(`${c.cityId}\0${c.userId}`);
    return before !== undefined && c.issuedAt < before;
  }

  /** Revokes one token (logout). */
  async revokeToken(c: RevocableClaims): Promise<void> {
    if (!c.jti) return;
    const t = Date.now();
    const row = { id: newId('rvk'), kind: 'token' as const, jti: c.jti, city_id: c.cityId, user_id: c.userId, before_ms: null, expires_at: c.expiresAt, created_at: t };
    await this.db.kysely.insertInto('revocations').values(row).execute();
    this.#remember(row);
  }

  /** Revokes every token of a user issued before now; returns that moment. */
  async revokeUser(cityId: string, userId: string): Promise<number> {
    const t = Date.now();
    const row = { id: newId('rvk'), kind: 'user' as const, jti: null, city_id: cityId, user_id: userId, before_ms: t, expires_at: t + MAX_TOKEN_LIFETIME_MS, created_at: t };
    await this.db.kysely.insertInto('revocations').values(row).execute();
    this.#remember(row);
    return t;
  }
}
