// Users' API keys on the request path (issue 33). A key is `cg_key_<id>_<secret>` (id: 12 of
// [a-z0-9], secret: 40 base62); the database keeps only the SHA-256 of the whole string.
//
// A key is looked up by its id, and its hash compared in constant time; a key verified once is
// cached by its full string (as verified JWTs are, tokens.ts), so a known key costs no database
// read per call. Every process polls `user_keys` for rows changed since its last poll (every
// change bumps updated_at) at most every ttlMs (2 s), before it answers from the cache, and
// PostgreSQL's change feed tells it at once: a revoke or an update holds on every process and
// replica within ttlMs of being written, as a token revocation does (revocations.ts). Expiry
// is checked on every call against the clock.
//
// last_used_at is written off the request path: at most once a minute per key and process, in
// one batch a moment later (Workers: in the request's background work).
import ipaddr from 'ipaddr.js';
import type { Db } from '../db/database.ts';
import type { UserKeysTable } from '../db/schema.ts';
import { sha256Hex } from './crypto.ts';
import { unauthorized } from './errors.ts';
import { USER_KEY_PREFIX, type Identity, type KeyBudgetWindow, type KeyLimits } from './identity.ts';
import type { WindowSpec } from './windows.ts';

export const KEY_ID_LENGTH = 12;
export const KEY_SECRET_LENGTH = 40;
const KEY_SHAPE = /^cg_key_([a-z0-9]{12})_[A-Za-z0-9]{40}$/;
/** Rows are polled with this overlap, so a row committed late (another replica's clock) is not missed. */
const OVERLAP_MS = 30_000;
const CACHE_MAX = 20_000;
const IDS_MAX = 50_000;
/** last_used_at is written at most this often per key and process. */
export const TOUCH_EVERY_MS = 60_000;

type KeyRow = Pick<
  UserKeysTable,
  'key_id' | 'city_id' | 'user_id' | 'secret_hash' | 'models' | 'budget_credits' | 'budget_window' | 'expires_at' | 'allowed_ips' | 'rpm' | 'status' | 'created_at' | 'updated_at'
>;
const COLUMNS = ['key_id', 'city_id', 'user_id', 'secret_hash', 'models', 'budget_credits', 'budget_window', 'expires_at', 'allowed_ips', 'rpm', 'status', 'created_at', 'updated_at'] as const;

/** One key as this process knows it. Replaced whole when the key changes (`live` goes false). */
interface Entry {
  id: string;
  hash: string;
  active: boolean;
  /** epoch ms, 0: never. */
  expiresAt: number;
  identity: Identity & { kind: 'user' };
  live: boolean;
  touchedAt: number;
  /** The row's updated_at: every change makes it larger (keys/store.ts). */
  updatedAt: number;
}

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const ID_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** `n` characters drawn uniformly from `alphabet` (rejection sampling: no modulo bias). */
function randomChars(alphabet: string, n: number): string {
  const max = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < n) {
    for (const b of crypto.getRandomValues(new Uint8Array(n * 2))) {
      if (b < max) out += alphabet[b % alphabet.length];
      if (out.length === n) break;
    }
  }
  return out;
}

/** A new key: its id, the whole secret string (shown once) and the hash that is stored. */
export async function newUserKey(): Promise<{ id: string; secret: string; hash: string }> {
  const id = randomChars(ID_CHARS, KEY_ID_LENGTH);
  const secret = `${USER_KEY_PREFIX}${id}_${randomChars(BASE62, KEY_SECRET_LENGTH)}`;
  return { id, secret, hash: await sha256Hex(secret) };
}

/** The id of a string shaped like a key, else null. */
export function userKeyId(token: string): string | null {
  return KEY_SHAPE.exec(token)?.[1] ?? null;
}

/** Equal-length hex digests compared without an early exit. */
function sameDigest(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** A matcher for a list of CIDRs or addresses (validated at write: a bad one matches nothing). */
export function ipMatcher(list: readonly string[]): (ip: string) => boolean {
  const ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] = [];
  for (const s of list) {
    try {
      if (s.includes('/')) ranges.push(ipaddr.parseCIDR(s));
      else {
        const a = ipaddr.process(s);
        ranges.push([a, a.kind() === 'ipv4' ? 32 : 128]);
      }
    } catch {
      /* checked by the action's schema */
    }
  }
  // the last address asked about, and its answer: a key is mostly used from one place
  let lastIp = '';
  let lastOk = false;
  return (ip) => {
    if (ip === lastIp) return lastOk;
    lastOk = matches(ip);
    lastIp = ip;
    return lastOk;
  };
  function matches(ip: string): boolean {
    let a: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      a = ipaddr.process(ip); // ::ffff:10.0.0.1 is 10.0.0.1
    } catch {
      return false;
    }
    for (const [range, bits] of ranges) {
      if (range.kind() === a.kind() && a.match(range, bits)) return true;
      // an IPv4-mapped range (::ffff:0:0/96 …) against an IPv4 address
      if (range.kind() === 'ipv6' && a.kind() === 'ipv4' && (a as ipaddr.IPv4).toIPv4MappedAddress().match(range, bits)) return true;
    }
    return false;
  }
}

function parseList(text: string | null): string[] | null {
  if (text === null) return null;
  try {
    const v = JSON.parse(text);
    return Array.isArray(v) ? v.map(String) : null;
  } catch {
    return null;
  }
}

/** A key budget's window in seconds (rolling); null: a total over the key's life. */
export const KEY_WINDOW_SECONDS: Record<KeyBudgetWindow, number> = { day: 86_400, week: 604_800, '30d': 2_592_000 };

/** A key's budget with its window for the rolling-windows engine (scope `key:<id>`). */
export function keyBudget(credits: number, window: KeyBudgetWindow | null): NonNullable<KeyLimits['budget']> {
  const spec: WindowSpec = window ? { seconds: KEY_WINDOW_SECONDS[window], limit: credits, name: window } : { limit: credits, name: 'total' };
  return { credits, window, windows: [spec] };
}

function entryOf(r: KeyRow): Entry {
  const models = parseList(r.models);
  const ips = parseList(r.allowed_ips);
  const limits: KeyLimits = {
    models,
    ips: ips && ips.length ? ipMatcher(ips) : null,
    rpm: r.rpm != null && Number(r.rpm) > 0 ? Number(r.rpm) : null,
    budget: r.budget_credits != null ? keyBudget(Number(r.budget_credits), (r.budget_window as KeyBudgetWindow | null) ?? null) : null,
  };
  const expiresAt = r.expires_at == null ? 0 : Number(r.expires_at);
  return {
    id: r.key_id,
    hash: r.secret_hash,
    active: r.status === 'active',
    expiresAt,
    identity: { kind: 'user', cityId: r.city_id, userId: r.user_id, expiresAt: expiresAt || Number.MAX_SAFE_INTEGER, keyId: r.key_id, key: limits },
    live: true,
    touchedAt: 0,
    updatedAt: Number(r.updated_at),
  };
}

const invalid = () => unauthorized('invalid_token', 'The bearer token is not valid.');

export class UserKeys {
  readonly db: Db;
  readonly ttlMs: number;
  /** key id → what this process knows of it (null: no such key, when it last looked). */
  #byId = new Map<string, Entry | null>();
  /** whole key string → its entry, once its hash has been checked. */
  #verified = new Map<string, Entry>();
  #polledAt = 0;
  #cursor = 0;
  #polling: Promise<void> | null = null;
  #loading = new Map<string, Promise<Entry | null>>();
  /** key id → last use not yet written. */
  #dirty = new Map<string, number>();
  #flushing: Promise<void> | null = null;
  readonly #keepAlive: (p: Promise<unknown>) => void;
  readonly #flushDelayMs: number;

  /** keepAlive: the runtime's hold on background work (gw.waitUntil). flushDelayMs: 0 on Workers. */
  constructor(db: Db, opts: { ttlMs?: number; keepAlive?: (p: Promise<unknown>) => void; flushDelayMs?: number } = {}) {
    this.db = db;
    this.ttlMs = opts.ttlMs ?? 2000;
    this.#keepAlive = opts.keepAlive ?? ((p) => void p.catch(() => {}));
    this.#flushDelayMs = opts.flushDelayMs ?? 500;
    db.changes?.subscribe((topic, id) => {
      if (topic === 'key') this.#drop(id);
    });
  }

  stale(): boolean {
    return Date.now() - this.#polledAt > this.ttlMs;
  }

  /**
   * The user identity of a key. The common case — changes polled recently, key verified
   * before, active and unexpired — answers from memory without a promise.
   */
  verify(token: string): Identity | Promise<Identity> {
    const now = Date.now();
    if (now - this.#polledAt <= this.ttlMs) {
      const e = this.#verified.get(token);
      if (e !== undefined && e.live && e.active) {
        if (e.expiresAt === 0 || e.expiresAt > now) {
          if (now - e.touchedAt >= TOUCH_EVERY_MS) this.#touch(e, now);
          return e.identity;
        }
      }
    }
    return this.#verify(token);
  }

  async #verify(token: string): Promise<Identity> {
    if (this.stale()) await this.poll();
    let e: Entry | null | undefined = this.#verified.get(token);
    if (e !== undefined && !e.live) {
      this.#verified.delete(token);
      e = undefined;
    }
    if (e === undefined) {
      const id = userKeyId(token);
      if (id === null) throw invalid();
      e = await this.#entry(id);
      // The hash is computed whatever the lookup found, and compared in constant time.
      const hash = await sha256Hex(token);
      if (!e || !sameDigest(hash, e.hash)) throw invalid();
      if (e.live) {
        if (this.#verified.size >= CACHE_MAX) this.#verified.delete(this.#verified.keys().next().value!);
        this.#verified.set(token, e);
      }
    }
    if (!e.active) throw unauthorized('key_revoked', 'This API key has been revoked.');
    const now = Date.now();
    if (e.expiresAt !== 0 && e.expiresAt <= now) throw unauthorized('key_expired', 'This API key has expired.');
    if (now - e.touchedAt >= TOUCH_EVERY_MS) this.#touch(e, now);
    return e.identity;
  }

  /** The entry of a key id: from memory, else one read (concurrent misses share it). */
  #entry(id: string): Promise<Entry | null> | Entry | null {
    const known = this.#byId.get(id);
    if (known !== undefined) return known;
    let loading = this.#loading.get(id);
    if (!loading) {
      loading = (async () => {
        try {
          const row = await this.db.kysely.selectFrom('user_keys').select(COLUMNS).where('key_id', '=', id).executeTakeFirst();
          const e = row ? entryOf(row) : null;
          if (this.#loading.get(id) === loading) {
            if (this.#byId.size >= IDS_MAX) this.#forgetAll();
            this.#byId.set(id, e);
          } else if (e) {
            // a change announced meanwhile dropped the id: this row may predate it, so it serves
            // the calls that waited for it but is not remembered (the next call reads again)
            e.live = false;
          }
          return e;
        } finally {
          if (this.#loading.get(id) === loading) this.#loading.delete(id);
        }
      })();
      this.#loading.set(id, loading);
    }
    return loading;
  }

  /** Reads the keys changed since the last poll (one small indexed SELECT) and replaces their entries. */
  poll(): Promise<void> {
    if (this.#polling) return this.#polling;
    // cleared in a later microtask, after it is set (#poll may finish without awaiting)
    const p: Promise<void> = this.#poll().finally(() => {
      if (this.#polling === p) this.#polling = null;
    });
    this.#polling = p;
    return p;
  }

  async #poll(): Promise<void> {
    const started = Date.now();
    if (this.#cursor !== 0 && this.#byId.size > 0) {
      const rows = await this.db.kysely
        .selectFrom('user_keys')
        .select(COLUMNS)
        .where('updated_at', '>=', this.#cursor - OVERLAP_MS)
        .execute();
      for (const r of rows) {
        const old = this.#byId.get(r.key_id);
        if (old === undefined) continue; // never asked for here
        if (old && old.updatedAt === Number(r.updated_at)) continue; // known already (the overlap reads it again)
        this.#drop(r.key_id);
        this.#byId.set(r.key_id, entryOf(r));
      }
    }
    this.#cursor = started;
    this.#polledAt = started;
  }

  /** This process changed a key (revoke, update, create): forget it here, and tell the others at once where the database can. */
  changed(id: string): void {
    this.#drop(id);
    this.db.changes?.publish('key', id);
  }

  /** Polls only update keys known here: keys no longer known must be verified again. */
  #forgetAll(): void {
    for (const e of this.#byId.values()) if (e) e.live = false;
    this.#byId.clear();
  }

  #drop(id: string): void {
    const old = this.#byId.get(id);
    if (old) old.live = false; // cached key strings of it go back through the slow path
    this.#byId.delete(id);
    this.#loading.delete(id);
  }

  #touch(e: Entry, now: number): void {
    e.touchedAt = now;
    this.#dirty.set(e.id, now);
    if (this.#flushing) return;
    const delay = this.#flushDelayMs;
    this.#flushing = (delay > 0 ? new Promise((r) => setTimeout(r, delay)) : Promise.resolve()).then(() => this.flush());
    this.#keepAlive(this.#flushing);
  }

  /** Writes the last uses noted (one batch). */
  async flush(): Promise<void> {
    const dirty = [...this.#dirty];
    this.#dirty.clear();
    this.#flushing = null;
    if (dirty.length === 0) return;
    await this.db.batch(
      dirty.map(([id, at]) =>
        this.db.kysely
          .updateTable('user_keys')
          .set({ last_used_at: at })
          .where('key_id', '=', id)
          .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)])),
      ),
    );
  }
}
