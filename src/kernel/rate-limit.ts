// Rate limits that hold across processes and replicas: the counters live in the database,
// one row per limited subject with a fixed one-minute window, updated by atomic multi-row
// UPSERT … RETURNING statements (SQLite, D1 and PostgreSQL alike; counter-batch.ts).
//
// Limits (env keys, per city overridden by cities/update { limits }; 0 or unset = off):
//   RATE_LIMIT_USER_RPM / _TPM   requests / tokens per minute per user   (POST actions of users)
//   RATE_LIMIT_CITY_RPM / _TPM   the same for all users of a city
//   RATE_LIMIT_USER_CONCURRENCY  requests in flight per user
//   RATE_LIMIT_GUEST_RPM         per client IP on login, OAuth start/result and checkout (default 60)
//
// Cost on the hot path, and its bound: nothing at all unless a limit applies to the request.
// Request counters are claimed in blocks: one UPSERT adds B to the window's count and this
// process then admits up to B requests from memory (B = a quarter of what is left of the limit,
// at most MAX_BLOCK; 1 when few are left, so a limit of 5 is counted request by request). The
// count in the database is therefore never below what was admitted, across every process:
// never more than the limit is served. Unused claimed slots die with the window, so other
// processes can be refused up to B per process early. A subject already over its limit in this
// window is refused from memory without touching the database. Token counters are added after
// the call (what was actually used) and read at each admission (batched per loop turn with every
// other counter of the process), so every process sees the same count.
import type { Db } from '../db/database.ts';
import type { CityLimits } from './city-settings.ts';
import type { CityStatusCache } from './city-status.ts';
import { GatewayError } from './errors.ts';
import type { Identity } from './identity.ts';
import type { RuntimeEnv } from './runtime-env.ts';
import { sql } from 'kysely';
import { CounterBatch } from './counter-batch.ts';

const WINDOW_MS = 60_000;
/** Most request slots one claim takes (one UPSERT per this many requests at most). */
const MAX_BLOCK = 100;
const DEFAULT_GUEST_RPM = 60;
/** In-flight counters untouched this long are stale (a process died mid-request). */
const INFLIGHT_STALE_MS = 10 * 60_000;

type Kind = 'requests' | 'tokens';

interface Counter {
  key: string;
  kind: Kind;
  limit: number;
  add: number;
}

/** What a request was admitted with: the headers to send, and what to undo or count later. */
export interface Admission {
  headers: Record<string, string>;
  /** The in-flight counter to release when the response has been sent. */
  inflightKey: string | null;
}

function limitOf(v: string | undefined): number {
  const n = Number(v);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/** OpenAI's reset format: "1s", "59s", "20ms". */
function resetIn(ms: number): string {
  return ms < 1000 ? `${Math.max(0, Math.ceil(ms))}ms` : `${Math.ceil(ms / 1000)}s`;
}

export class RateLimiter {
  readonly db: Db;
  readonly env: RuntimeEnv;
  readonly cities: CityStatusCache;
  /** key → `window start:limit` it is known to be over in (refused without a query). */
  #over = new Map<string, string>();
  /** Request slots this process claimed and has not used yet, per counter key. */
  #slots = new Map<string, { windowStart: number; left: number; n: number; claiming: Promise<void> | null }>();
  #sweptAt = Date.now();
  #batch: CounterBatch;

  constructor(db: Db, env: RuntimeEnv, cities: CityStatusCache) {
    this.db = db;
    this.env = env;
    this.cities = cities;
    this.#batch = new CounterBatch(db);
  }

  /** The client's IP: the socket's, or the TRUST_PROXY-th hop from the right of X-Forwarded-For. */
  clientIp(req: Request, socketIp: string | null): string {
    const hops = Number(this.env.get('TRUST_PROXY') ?? 0);
    const ip = socketIp ?? 'unknown';
    if (!Number.isInteger(hops) || hops <= 0) return ip;
    const chain = (req.headers.get('x-forwarded-for') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
    chain.push(ip);
    // The socket is the nearest proxy; each trusted hop vouches for the address before it.
    return chain[Math.max(0, chain.length - 1 - hops)];
  }

  /** The counters that apply to one request (none: the request costs nothing here). */
  #counters(identity: Identity, method: string, ipLimited: boolean, ip: () => string, l: CityLimits): Counter[] {
    const out: Counter[] = [];
    if (ipLimited) {
      const v = this.env.get('RATE_LIMIT_GUEST_RPM');
      const rpm = v === undefined ? DEFAULT_GUEST_RPM : limitOf(v);
      if (rpm > 0) out.push({ key: `ip:${ip()}`, kind: 'requests', limit: rpm, add: 1 });
    }
    if (identity.kind === 'user' && method === 'POST') {
      const pick = (own: number | null | undefined, envKey: string) => (own != null ? own : limitOf(this.env.get(envKey)));
      const urpm = pick(l.user_rpm, 'RATE_LIMIT_USER_RPM');
      const crpm = pick(l.city_rpm, 'RATE_LIMIT_CITY_RPM');
      const utpm = pick(l.user_tpm, 'RATE_LIMIT_USER_TPM');
      const ctpm = pick(l.city_tpm, 'RATE_LIMIT_CITY_TPM');
      if (urpm <= 0 && crpm <= 0 && utpm <= 0 && ctpm <= 0) return out; // no limit: no keys to build
      // \x1f (unit separator) between city and user: PostgreSQL text cannot hold \0.
      const user = `u:${identity.cityId}\x1f${identity.userId}`;
      const city = `c:${identity.cityId}`;
      if (urpm > 0) out.push({ key: `${user}:rpm`, kind: 'requests', limit: urpm, add: 1 });
      if (crpm > 0) out.push({ key: `${city}:rpm`, kind: 'requests', limit: crpm, add: 1 });
      if (utpm > 0) out.push({ key: `${user}:tpm`, kind: 'tokens', limit: utpm, add: 0 });
      if (ctpm > 0) out.push({ key: `${city}:tpm`, kind: 'tokens', limit: ctpm, add: 0 });
    }
    return out;
  }

  #concurrency(identity: Identity, method: string, limits: { user_concurrency?: number | null }): number {
    if (identity.kind !== 'user' || method !== 'POST') return 0;
    return limits.user_concurrency != null ? limits.user_concurrency : limitOf(this.env.get('RATE_LIMIT_USER_CONCURRENCY'));
  }

  /**
   * Counts the request against every limit that applies; throws 429 rate_limited when one is
   * exceeded. Null when no limit applies.
   */
  async admit(identity: Identity, method: string, ipLimited: boolean, ip: () => string): Promise<Admission | null> {
    // The city's limits, read once (from memory) for both the counters and the concurrency cap.
    const limits = identity.kind === 'user' ? ((await this.cities.settings(identity.cityId)).limits ?? {}) : {};
    const counters = this.#counters(identity, method, ipLimited, ip, limits);
    const maxInflight = this.#concurrency(identity, method, limits);
    if (counters.length === 0 && maxInflight === 0) return null;
    const now = Date.now();
    const windowStart = now - (now % WINDOW_MS);
    const resetMs = windowStart + WINDOW_MS - now;

    // Known over in this window: refuse from memory.
    for (const c of counters) {
      if (this.#over.get(c.key) === `${windowStart}:${c.limit}`) throw this.#refuse(c, c.limit + 1, resetMs, counters);
    }
    const counted = await Promise.all(counters.map((c) => (c.kind === 'requests' ? this.#takeSlot(c, windowStart) : this.#batch.add(c.key, 0, windowStart))));
    const counts = new Map(counters.map((c, i) => [c.key, counted[i]]));
    for (const c of counters) {
      const n = counts.get(c.key) ?? 0;
      const over = c.kind === 'requests' ? n > c.limit : n >= c.limit;
      if (over) {
        if (this.#over.size > 100_000) this.#over.clear();
        this.#over.set(c.key, `${windowStart}:${c.limit}`);
        throw this.#refuse(c, n, resetMs, counters, counts);
      }
    }
    this.#sweep(now);

    let inflightKey: string | null = null;
    if (maxInflight > 0 && identity.kind === 'user') {
      inflightKey = `inflight:${identity.cityId}\x1f${identity.userId}`;
      const [row] = await this.db.kysely
        .insertInto('rate_counters')
        .values({ key: inflightKey, window_start: now, n: 1 })
        .onConflict((oc) =>
          oc.column('key').doUpdateSet({
            n: sql<number>`CASE WHEN rate_counters.window_start < ${now - INFLIGHT_STALE_MS} THEN 1 ELSE rate_counters.n + 1 END`,
            window_start: sql<number>`excluded.window_start`,
          }),
        )
        .returning('n')
        .execute();
      if (Number(row.n) > maxInflight) {
        await this.release(inflightKey);
        throw new GatewayError(429, 'rate_limited', `Too many requests in flight for this user (at most ${maxInflight}). Retry when one has finished.`, {
          headers: { 'retry-after': '1' },
        });
      }
    }
    return { headers: this.#headers(counters, counts, resetMs), inflightKey };
  }

  /**
   * One request slot of a counter: from this process's claimed block, or from a new claim. The
   * answer is the count that decides (> limit: refused), as if this request were counted alone.
   */
  async #takeSlot(c: Counter, windowStart: number): Promise<number> {
    for (;;) {
      let s = this.#slots.get(c.key);
      if (!s || s.windowStart !== windowStart) {
        if (this.#slots.size > 100_000) this.#slots.clear();
        this.#slots.set(c.key, (s = { windowStart, left: 0, n: 0, claiming: null }));
      }
      if (s.left > 0) {
        s.left--;
        return s.n - s.left;
      }
      if (s.claiming) {
        await s.claiming;
        continue;
      }
      if (s.n >= c.limit) return s.n + 1; // this window's slots are all claimed
      const block = Math.max(1, Math.min(MAX_BLOCK, Math.floor((c.limit - s.n) / 4)));
      const state = s;
      state.claiming = this.#batch.add(c.key, block, windowStart).then(
        (after) => {
          // Slots (after − block, after] are ours; those past the limit are not.
          const got = Math.max(0, Math.min(block, c.limit - (after - block)));
          state.n = after - block + got;
          state.left += got;
          if (got === 0) state.n = Math.max(state.n, after);
        },
      ).finally(() => (state.claiming = null));
      await state.claiming;
      if (state.left === 0) return Math.max(state.n, c.limit) + 1;
    }
  }

  /** Ends an in-flight request counted by admit. */
  async release(inflightKey: string): Promise<void> {
    await this.db.kysely
      .updateTable('rate_counters')
      .set({ n: sql<number>`CASE WHEN n > 0 THEN n - 1 ELSE 0 END` })
      .where('key', '=', inflightKey)
      .execute();
  }

  /**
   * Adds the tokens a call actually used (input + output, from its meter record) to the token
   * counters of its user and city, in the current window. Runs after the call, off its path.
   */
  async countTokens(r: { identity: string; city_id: string | null; user_id: string | null; input_tokens: number; output_tokens: number }): Promise<void> {
    const tokens = Math.round((r.input_tokens || 0) + (r.output_tokens || 0));
    if (r.identity !== 'user' || !r.city_id || !r.user_id || tokens <= 0) return;
    const l = (await this.cities.settings(r.city_id)).limits ?? {};
    const keys: string[] = [];
    if ((l.user_tpm != null ? l.user_tpm : limitOf(this.env.get('RATE_LIMIT_USER_TPM'))) > 0) keys.push(`u:${r.city_id}\x1f${r.user_id}:tpm`);
    if ((l.city_tpm != null ? l.city_tpm : limitOf(this.env.get('RATE_LIMIT_CITY_TPM'))) > 0) keys.push(`c:${r.city_id}:tpm`);
    if (keys.length === 0) return;
    const now = Date.now();
    const windowStart = now - (now % WINDOW_MS);
    await Promise.all(keys.map((key) => this.#batch.add(key, tokens, windowStart)));
  }

  #headers(counters: Counter[], counts: Map<string, number>, resetMs: number): Record<string, string> {
    const h: Record<string, string> = {};
    for (const kind of ['requests', 'tokens'] as const) {
      // The tightest limit of each kind: the one with the least remaining.
      let best: { limit: number; remaining: number } | null = null;
      for (const c of counters) {
        if (c.kind !== kind) continue;
        const remaining = Math.max(0, c.limit - (counts.get(c.key) ?? 0));
        if (!best || remaining < best.remaining) best = { limit: c.limit, remaining };
      }
      if (!best) continue;
      h[`x-ratelimit-limit-${kind}`] = String(best.limit);
      h[`x-ratelimit-remaining-${kind}`] = String(best.remaining);
      h[`x-ratelimit-reset-${kind}`] = resetIn(resetMs);
    }
    return h;
  }

  #refuse(c: Counter, n: number, resetMs: number, counters: Counter[], counts = new Map<string, number>()): GatewayError {
    const all = new Map(counts);
    all.set(c.key, n);
    const headers = { 'retry-after': String(Math.max(1, Math.ceil(resetMs / 1000))), ...this.#headers(counters, all, resetMs) };
    const who = c.key.startsWith('ip:') ? 'this client address' : c.key.startsWith('c:') ? 'this city' : 'this user';
    const unit = c.kind === 'requests' ? 'requests' : 'tokens';
    return new GatewayError(429, 'rate_limited', `Rate limit reached for ${who}: ${c.limit} ${unit} per minute. Retry after ${headers['retry-after']} s.`, { headers });
  }

  /** Drops counters of windows long past, at most every 10 minutes per process (off the path). */
  #sweep(now: number): void {
    if (now - this.#sweptAt < 10 * WINDOW_MS) return;
    this.#sweptAt = now;
    void this.db.kysely
      .deleteFrom('rate_counters')
      .where('window_start', '<', now - 60 * WINDOW_MS)
      .execute()
      .catch(() => {});
  }
}
