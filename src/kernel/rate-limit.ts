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
// Cost on the hot path, and its bound: nothing at all unless a limit applies to the request,
// and otherwise, most of the time, no database statement and no promise: admit answers from
// memory (the caller awaits only when it gets a promise).
// Request counters are claimed in blocks: one UPSERT adds B to the window's count and this
// process then admits up to B requests from memory (B = a quarter of what is left of the limit,
// and at most the larger of MIN_BLOCK and half a second of this process's recent pace on the
// counter, never above MAX_BLOCK; 1 when few are left, so a limit of 5 is counted request by
// request). A block of at least PREFETCH_FROM slots claims the next one when a quarter is left, so
// requests do not wait for the claim. The count in the database is therefore never below what was
// admitted, across every process: never more than the limit is served. Unused claimed slots die
// with the window, so other processes can be refused up to 1.25 B per process early (at most
// 125 requests, or about 0.6 s of this process's traffic). A subject already over its limit in
// this window is refused from memory without touching the database.
// Token counters count the tokens calls actually used, written every 100 ms and read at most
// every 100 ms per key (token-counts.ts): this process's own tokens count at once, another
// process's within 100 ms of their write (200 ms of the call). On Workers each call's tokens are
// written in its own background work (no timer outlives a request).
import type { Db } from '../db/database.ts';
import type { CityLimits } from './city-settings.ts';
import type { CityStatusCache } from './city-status.ts';
import { GatewayError } from './errors.ts';
import type { Identity } from './identity.ts';
import type { RuntimeEnv } from './runtime-env.ts';
import { sql } from 'kysely';
import { CounterBatch } from './counter-batch.ts';
import { TokenCounts } from './token-counts.ts';

const WINDOW_MS = 60_000;
/** A claim takes up to this many slots whatever the pace (one UPSERT per this many requests at most)… */
const MIN_BLOCK = 100;
/** …and up to this long of the process's recent pace on the counter, when that is more (one UPSERT per counter per half second under load)… */
const BLOCK_PACE_MS = 500;
/** …but never more than this. */
const MAX_BLOCK = 10_000;
/** The pace is measured over spans of at least this long. */
const PACE_SPAN_MS = 100;
/** Blocks of at least this many slots claim the next one early (near the limit, none is claimed ahead). */
const PREFETCH_FROM = 8;
const DEFAULT_GUEST_RPM = 60;
const NO_LIMITS: CityLimits = {};
/** In-flight counters untouched this long are stale (a process died mid-request). */
const INFLIGHT_STALE_MS = 10 * 60_000;

type Kind = 'requests' | 'tokens';

interface Counter {
  key: string;
  kind: Kind;
  limit: number;
  limitText?: string;
}

interface UserKeys {
  userRpm: string;
  userTpm: string;
  cityRpm: string;
  cityTpm: string;
  /** The counters of the user's last request and the limits they were built for (shared: only limitText is ever set). */
  last?: LastCounters;
}

interface LastCounters {
  urpm: number;
  crpm: number;
  utpm: number;
  ctpm: number;
  /** A user API key's rpm (0: none). */
  krpm: number;
  counters: readonly Counter[];
}

/** This process's claimed request slots of one counter in one window. */
interface Slots {
  windowStart: number;
  /** Slots claimed and not used yet; the last one is numbered n (the count it stands for). */
  left: number;
  n: number;
  /** The next block is claimed when `left` comes down to this (0: only once none is left). */
  low: number;
  /** A claim got no slot: the limit is reached in this window. */
  full: boolean;
  claiming: Promise<void> | null;
  /** Slots used in this window, and when the pace was last measured and how many were used then. */
  used: number;
  pacedAt: number;
  usedAtPace: number;
  /** Slots used per ms over the last span of at least PACE_SPAN_MS (carried into the next window). */
  pace: number;
}

/** The env's limits, parsed once per env snapshot (they are read on every admission). */
interface EnvLimits {
  guestRpm: number;
  userRpm: number;
  cityRpm: number;
  userTpm: number;
  cityTpm: number;
  userConcurrency: number;
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
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const s = Math.ceil(ms / 1000);
  return (SECONDS[s] ??= `${s}s`);
}
const SECONDS: string[] = [];

/** A counter's limit as header text, converted once (counters are reused across requests). */
function limitText(c: Counter): string {
  return (c.limitText ??= String(c.limit));
}

export class RateLimiter {
  readonly db: Db;
  readonly env: RuntimeEnv;
  readonly cities: CityStatusCache;
  /** key → the window and limit it is known to be over in (refused without a query). */
  #over = new Map<string, { windowStart: number; limit: number }>();
  /** Request slots this process claimed and has not used yet, per counter key. */
  #slots = new Map<string, Slots>();
  #sweptAt = Date.now();
  /** city → user → its counter keys. */
  #keys = new Map<string, Map<string, UserKeys>>();
  /** API key id → the counters of its last request (keys with an rpm of their own). */
  #keyLast = new Map<string, LastCounters>();
  #batch: CounterBatch;
  #tokens: TokenCounts;

  #keepAlive: (p: Promise<unknown>) => void;
  #envLimits: EnvLimits | null = null;
  #envVersion = -1;

  /**
   * writeThrough: no timers that outlive a request (a runtime without a graceful stop: Workers).
   * keepAlive: the runtime's hold on work started in the background (gw.waitUntil: on Workers,
   * the current request's), which also logs its failures.
   */
  constructor(db: Db, env: RuntimeEnv, cities: CityStatusCache, opts: { writeThrough?: boolean; keepAlive?: (p: Promise<unknown>) => void } = {}) {
    this.db = db;
    this.env = env;
    this.cities = cities;
    this.#batch = new CounterBatch(db);
    this.#keepAlive = opts.keepAlive ?? ((p) => void p.catch(() => {}));
    this.#tokens = new TokenCounts(this.#batch, opts.writeThrough ?? false, this.#keepAlive);
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

  #fromEnv(): EnvLimits {
    if (this.#envLimits && this.#envVersion === this.env.version) return this.#envLimits;
    const guest = this.env.get('RATE_LIMIT_GUEST_RPM');
    this.#envVersion = this.env.version;
    return (this.#envLimits = {
      guestRpm: guest === undefined ? DEFAULT_GUEST_RPM : limitOf(guest),
      userRpm: limitOf(this.env.get('RATE_LIMIT_USER_RPM')),
      cityRpm: limitOf(this.env.get('RATE_LIMIT_CITY_RPM')),
      userTpm: limitOf(this.env.get('RATE_LIMIT_USER_TPM')),
      cityTpm: limitOf(this.env.get('RATE_LIMIT_CITY_TPM')),
      userConcurrency: limitOf(this.env.get('RATE_LIMIT_USER_CONCURRENCY')),
    });
  }

  /** The counters that apply to one request (none: the request costs nothing here). */
  #counters(identity: Identity, method: string, ipLimited: boolean, ip: () => string, l: CityLimits): readonly Counter[] {
    const out: Counter[] = [];
    const e = this.#fromEnv();
    if (ipLimited && e.guestRpm > 0) out.push({ key: `ip:${ip()}`, kind: 'requests', limit: e.guestRpm });
    if (identity.kind === 'user' && method === 'POST') {
      const urpm = l.user_rpm ?? e.userRpm;
      const crpm = l.city_rpm ?? e.cityRpm;
      const utpm = l.user_tpm ?? e.userTpm;
      const ctpm = l.city_tpm ?? e.cityTpm;
      // A user API key's own rpm (accounts/keys), on top of the user's and the city's.
      const krpm = identity.key?.rpm ?? 0;
      if (urpm <= 0 && crpm <= 0 && utpm <= 0 && ctpm <= 0 && krpm <= 0) return out; // no limit: no keys to build
      const k = this.#keysOf(identity.cityId, identity.userId);
      // The same limits as this user's (or key's) last request (the usual case): the same counters.
      const last = krpm > 0 ? this.#keyLast.get(identity.keyId!) : k.last;
      if (out.length === 0 && last && last.urpm === urpm && last.crpm === crpm && last.utpm === utpm && last.ctpm === ctpm && last.krpm === krpm) return last.counters;
      if (urpm > 0) out.push({ key: k.userRpm, kind: 'requests', limit: urpm });
      if (crpm > 0) out.push({ key: k.cityRpm, kind: 'requests', limit: crpm });
      if (utpm > 0) out.push({ key: k.userTpm, kind: 'tokens', limit: utpm });
      if (ctpm > 0) out.push({ key: k.cityTpm, kind: 'tokens', limit: ctpm });
      if (krpm > 0) out.push({ key: `k:${identity.keyId}:rpm`, kind: 'requests', limit: krpm });
      if (!ipLimited) {
        const built = { urpm, crpm, utpm, ctpm, krpm, counters: out };
        if (krpm === 0) k.last = built;
        else {
          if (this.#keyLast.size > 10_000) this.#keyLast.clear();
          this.#keyLast.set(identity.keyId!, built);
        }
      }
    }
    return out;
  }

  /**
   * The counter keys of a user and its city, built once (a key built per request is a new string
   * to hash at every map lookup).
   */
  #keysOf(cityId: string, userId: string): UserKeys {
    let byUser = this.#keys.get(cityId);
    if (!byUser) {
      if (this.#keys.size > 10_000) this.#keys.clear();
      this.#keys.set(cityId, (byUser = new Map()));
    }
    let k = byUser.get(userId);
    if (!k) {
      if (byUser.size > 10_000) byUser.clear();
      // \x1f (unit separator) between city and user: PostgreSQL text cannot hold \0.
      const user = `u:${cityId}\x1f${userId}`;
      byUser.set(userId, (k = { userRpm: `${user}:rpm`, userTpm: `${user}:tpm`, cityRpm: `c:${cityId}:rpm`, cityTpm: `c:${cityId}:tpm` }));
    }
    return k;
  }

  #concurrency(identity: Identity, method: string, limits: { user_concurrency?: number | null }): number {
    if (identity.kind !== 'user' || method !== 'POST') return 0;
    return limits.user_concurrency ?? this.#fromEnv().userConcurrency;
  }

  /**
   * Counts the request against every limit that applies; throws 429 rate_limited when one is
   * exceeded. Null when no limit applies. Answers without a promise when everything it needs is
   * in memory (the city's settings, a claimed request slot per counter, fresh token counts):
   * the caller awaits only when it gets a promise.
   */
  admit(identity: Identity, method: string, ipLimited: boolean, ip: () => string): Admission | null | Promise<Admission | null> {
    // The city's limits, read once (from memory) for both the counters and the concurrency cap.
    let limits: CityLimits = NO_LIMITS;
    if (identity.kind === 'user') {
      const city = this.cities.peek(identity.cityId);
      if (!city) return this.cities.settings(identity.cityId).then(() => this.admit(identity, method, ipLimited, ip));
      limits = city.settings.limits ?? NO_LIMITS;
    }
    const counters = this.#counters(identity, method, ipLimited, ip, limits);
    const maxInflight = this.#concurrency(identity, method, limits);
    if (counters.length === 0 && maxInflight === 0) return null;
    const now = Date.now();
    const windowStart = now - (now % WINDOW_MS);
    const resetMs = windowStart + WINDOW_MS - now;

    // Known over in this window: refuse from memory.
    if (this.#over.size > 0) {
      for (const c of counters) {
        const o = this.#over.get(c.key);
        if (o && o.windowStart === windowStart && o.limit === c.limit) throw this.#refuse(c, c.limit + 1, resetMs, counters, []);
      }
    }
    // Each counter's count from memory when it can; the rest from the database.
    const counts: number[] = new Array(counters.length);
    let waits: Promise<void>[] | null = null;
    for (let i = 0; i < counters.length; i++) {
      const c = counters[i];
      const n = c.kind === 'requests' ? this.#slotNow(c, windowStart) : this.#tokens.peek(c.key, windowStart, now);
      if (n !== undefined) counts[i] = n;
      else (waits ??= []).push((c.kind === 'requests' ? this.#takeSlot(c, windowStart) : this.#tokens.read(c.key, windowStart)).then((n) => void (counts[i] = n)));
    }
    if (waits || maxInflight > 0) {
      return (async () => {
        if (waits) await Promise.all(waits);
        this.#decide(counters, counts, windowStart, resetMs);
        const inflightKey = maxInflight > 0 && identity.kind === 'user' ? await this.#enter(identity, maxInflight, now) : null;
        return { headers: this.#headers(counters, counts, resetMs), inflightKey };
      })();
    }
    this.#decide(counters, counts, windowStart, resetMs);
    return { headers: this.#headers(counters, counts, resetMs), inflightKey: null };
  }

  /** Throws 429 when a count is over its limit (and remembers it: later calls are refused from memory). */
  #decide(counters: readonly Counter[], counts: number[], windowStart: number, resetMs: number): void {
    for (let i = 0; i < counters.length; i++) {
      const c = counters[i];
      const n = counts[i];
      if (c.kind === 'requests' ? n > c.limit : n >= c.limit) {
        if (this.#over.size > 100_000) this.#over.clear();
        this.#over.set(c.key, { windowStart, limit: c.limit });
        throw this.#refuse(c, n, resetMs, counters, counts);
      }
    }
    this.#sweep(Date.now());
  }

  /** Counts the request in flight for its user; throws 429 over the cap. The key to release. */
  async #enter(identity: Identity & { kind: 'user' }, maxInflight: number, now: number): Promise<string> {
    const inflightKey = `inflight:${identity.cityId}\x1f${identity.userId}`;
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
    return inflightKey;
  }

  /** A request slot from this process's claimed block, if one is left; undefined: call #takeSlot. */
  #slotNow(c: Counter, windowStart: number): number | undefined {
    const s = this.#slots.get(c.key);
    if (!s || s.windowStart !== windowStart) return undefined;
    if (s.left > 0) return this.#take(c, s);
    return !s.claiming && (s.full || s.n >= c.limit) ? Math.max(s.n, c.limit) + 1 : undefined; // this window's slots are all claimed: refused
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
        const pace = s?.pace ?? 0; // the pace carries over into the new window
        this.#slots.set(c.key, (s = { windowStart, left: 0, n: 0, low: 0, full: false, claiming: null, used: 0, pacedAt: 0, usedAtPace: 0, pace }));
      }
      if (s.left > 0) return this.#take(c, s);
      if (s.claiming) {
        await s.claiming;
        continue;
      }
      if (s.full || s.n >= c.limit) return Math.max(s.n, c.limit) + 1; // this window's slots are all claimed
      await this.#claim(c, s);
    }
  }

  /** Uses one slot of the block; the next block is claimed when a quarter of this one is left. */
  #take(c: Counter, s: Slots): number {
    s.left--;
    s.used++;
    const n = s.n - s.left;
    if (s.left === s.low && s.low > 0 && !s.claiming && !s.full && s.n < c.limit) {
      // In the background: the requests meanwhile keep taking from memory.
      this.#keepAlive(this.#claim(c, s));
    }
    return n;
  }

  /**
   * Claims the next block of slots: a quarter of what is left of the limit, and at most the
   * larger of MIN_BLOCK and BLOCK_PACE_MS of this process's pace (never above MAX_BLOCK).
   */
  #claim(c: Counter, s: Slots): Promise<void> {
    // The pace is measured over at least PACE_SPAN_MS: a burst of claims keeps the last one.
    const now = Date.now();
    if (now - s.pacedAt >= PACE_SPAN_MS) {
      if (s.pacedAt > 0) s.pace = (s.used - s.usedAtPace) / (now - s.pacedAt);
      s.pacedAt = now;
      s.usedAtPace = s.used;
    }
    const most = Math.min(MAX_BLOCK, Math.max(MIN_BLOCK, Math.ceil(s.pace * BLOCK_PACE_MS)));
    const block = Math.max(1, Math.min(most, Math.floor((c.limit - s.n) / 4)));
    s.claiming = this.#batch.add(c.key, block, s.windowStart).then(
      (after) => {
        // Slots (after − block, after] are ours; those past the limit are not. Slots left of the
        // previous block count as just below them (what decides is only that none is past the limit).
        const got = Math.max(0, Math.min(block, c.limit - (after - block)));
        if (got > 0) s.n = after - block + got;
        else s.full = true; // the slots still held keep their numbers
        s.left += got;
        s.low = got >= PREFETCH_FROM ? Math.floor(got / 4) : 0;
        s.claiming = null;
      },
      (e: unknown) => {
        s.claiming = null;
        throw e;
      },
    );
    return s.claiming;
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
   * The promise, when there is one, is the write to keep alive (gw.waitUntil): null when the
   * tokens go out with a write already scheduled, or when no token limit applies.
   */
  countTokens(r: { identity: string; city_id: string | null; user_id: string | null; input_tokens: number; output_tokens: number }): Promise<void> | null {
    const tokens = Math.round((r.input_tokens || 0) + (r.output_tokens || 0));
    if (r.identity !== 'user' || !r.city_id || !r.user_id || tokens <= 0) return null;
    const city = this.cities.peek(r.city_id);
    if (!city) return this.cities.settings(r.city_id).then(() => this.countTokens(r) ?? undefined);
    const l = city.settings.limits ?? NO_LIMITS;
    const now = Date.now();
    const windowStart = now - (now % WINDOW_MS);
    let user: Promise<void> | null = null;
    let whole: Promise<void> | null = null;
    const e = this.#fromEnv();
    if ((l.user_tpm ?? e.userTpm) > 0) user = this.#tokens.add(this.#keysOf(r.city_id, r.user_id).userTpm, tokens, windowStart);
    if ((l.city_tpm ?? e.cityTpm) > 0) whole = this.#tokens.add(this.#keysOf(r.city_id, r.user_id).cityTpm, tokens, windowStart);
    return user && whole ? Promise.all([user, whole]).then(() => {}) : (user ?? whole);
  }

  /** The x-ratelimit-* headers: per kind, the tightest limit (the one with the least remaining). */
  #headers(counters: readonly Counter[], counts: number[], resetMs: number): Record<string, string> {
    let requests: Counter | null = null;
    let tokens: Counter | null = null;
    let rLeft = 0;
    let tLeft = 0;
    for (let i = 0; i < counters.length; i++) {
      const c = counters[i];
      const left = Math.max(0, c.limit - (counts[i] ?? 0));
      if (c.kind === 'requests') {
        if (!requests || left < rLeft) (requests = c), (rLeft = left);
      } else if (!tokens || left < tLeft) (tokens = c), (tLeft = left);
    }
    const reset = resetIn(resetMs);
    const h: Record<string, string> = requests
      ? { 'x-ratelimit-limit-requests': limitText(requests), 'x-ratelimit-remaining-requests': String(rLeft), 'x-ratelimit-reset-requests': reset }
      : {};
    if (tokens) {
      h['x-ratelimit-limit-tokens'] = limitText(tokens);
      h['x-ratelimit-remaining-tokens'] = String(tLeft);
      h['x-ratelimit-reset-tokens'] = reset;
    }
    return h;
  }

  #refuse(c: Counter, n: number, resetMs: number, counters: readonly Counter[], counts: number[]): GatewayError {
    const all = counters.map((d, i) => (d === c ? n : counts[i]));
    const headers = { 'retry-after': String(Math.max(1, Math.ceil(resetMs / 1000))), ...this.#headers(counters, all, resetMs) };
    const who = c.key.startsWith('ip:') ? 'this client address' : c.key.startsWith('c:') ? 'this city' : c.key.startsWith('k:') ? 'this API key' : 'this user';
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
