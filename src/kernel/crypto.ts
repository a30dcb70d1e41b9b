// Small Web Crypto helpers that run the same on Node and Workers.

const enc = new TextEncoder();

// Random bytes are drawn 4 KiB at a time and each byte is used once: one getRandomValues call
// per short id cost ~4 % of a charged call's CPU (every hold has an id). The pool is filled on
// first use, not at module load (Workers refuse random values in global scope).
const POOL_BYTES = 4096;
let pool: Uint8Array | null = null;
let poolAt = POOL_BYTES;

function randomBytes(n: number): Uint8Array {
  if (n > POOL_BYTES / 4) return crypto.getRandomValues(new Uint8Array(n));
  if (!pool || poolAt + n > POOL_BYTES) {
    pool = crypto.getRandomValues(new Uint8Array(POOL_BYTES));
    poolAt = 0;
  }
  const out = pool.slice(poolAt, poolAt + n);
  pool.fill(0, poolAt, poolAt + n); // never handed out twice, not even by a bug
  poolAt += n;
  return out;
}

export function randomToken(bytes = 32): string {
  return base64url(randomBytes(bytes));
}

export function base64url(data: Uint8Array): string {
  let s = '';
  for (const b of data) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function hex(data: ArrayBuffer | Uint8Array): string {
  return [...new Uint8Array(data)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

export async function sha256Hex(text: string): Promise<string> {
  return hex(await crypto.subtle.digest('SHA-256', enc.encode(text)));
}

/**
 * Compares two secrets in constant time: both are hashed first, so neither the length
 * nor the position of the first difference shows in the timing.
 */
export async function safeEqual(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([
    crypto.subtle.digest('SHA-256', enc.encode(a)),
    crypto.subtle.digest('SHA-256', enc.encode(b)),
  ]);
  const u = new Uint8Array(x);
  const v = new Uint8Array(y);
  let diff = 0;
  for (let i = 0; i < u.length; i++) diff |= u[i] ^ v[i];
  return diff === 0;
}

/** A short random id with a readable prefix, e.g. `city_3fZ…`. */
export function newId(prefix: string, bytes = 12): string {
  return `${prefix}_${randomToken(bytes)}`;
}

/**
 * Request ids: unique, cheap (a per-process random prefix and a counter; no entropy per call),
 * not secret. The prefix is drawn on first use, not at module load: Workers refuse random
 * values in global scope (the isolate would fail to start).
 */
let processPrefix: string | null = null;
let requestCounter = 0;
export function requestId(): string {
  processPrefix ??= randomToken(6);
  return `req_${processPrefix}${(requestCounter++).toString(36)}`;
}
