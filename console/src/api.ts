// The console's only way to the gateway: the public /v1 API on this origin, with the
// credential kept in sessionStorage (gone when the tab closes; never localStorage, a cookie or
// a URL). Every error comes back as ApiError with the gateway's own message.

let KEY = 'citygate.console.key';
/** The sessionStorage slot of this app's credential (the users' page keeps one per city). */
export const setSessionSlot = (name: string) => void (KEY = name);

export class ApiError extends Error {
  status: number;
  code: string;
  param?: string;
  constructor(status: number, code: string, message: string, param?: string) {
    super(message);
    this.status = status;
    this.code = code;
    this.param = param;
  }
}

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY),
  set: (key: string) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

type Query = Record<string, string | number | boolean | undefined | null>;

export function queryString(q: Query = {}): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

let onUnauthorized: (() => void) | null = null;
export const setUnauthorizedHandler = (f: () => void) => void (onUnauthorized = f);

export async function errorOf(res: Response): Promise<ApiError> {
  let body: { error?: { code?: string; message?: string; param?: string } } | null = null;
  try {
    body = await res.json();
  } catch {
    /* not JSON */
  }
  const e = body?.error;
  return new ApiError(res.status, e?.code ?? `http_${res.status}`, e?.message ?? `${res.status} ${res.statusText}`, e?.param);
}

/** A raw request with a bearer credential (the console's, or another, e.g. a user token). */
export async function request(method: 'GET' | 'POST', path: string, opts: { query?: Query; body?: unknown; token?: string; signal?: AbortSignal } = {}): Promise<Response> {
  const token = opts.token ?? session.key();
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(`/v1/${path}${queryString(opts.query)}`, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
      cache: 'no-store',
    });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError(0, 'network_error', `The gateway could not be reached (${(e as Error).message}).`);
  }
  if (!res.ok) {
    const err = await errorOf(res);
    if (res.status === 401 && !opts.token) onUnauthorized?.();
    throw err;
  }
  return res;
}

export async function get<T>(path: string, query?: Query, token?: string): Promise<T> {
  return (await request('GET', path, { query, token })).json() as Promise<T>;
}

export async function post<T>(path: string, body: unknown = {}, token?: string): Promise<T> {
  return (await request('POST', path, { body, token })).json() as Promise<T>;
}

// Shapes of the /v1 answers the console reads.
export interface City { city_id: string; name: string; status: 'active' | 'paused'; created_at: string; updated_at: string }
export interface Page<T> { items: T[]; next_cursor: string | null }
export interface UsageRecord {
  usage_id: string; request_id: string; city_id: string | null; user_id: string | null; model: string; mode: string;
  status: string; error_code: string | null; input_tokens: number; output_tokens: number; cached_tokens: number;
  cache_write_tokens?: number; cache_write_1h_tokens?: number; note?: string | null;
  images: number; seconds: number; credits: number; duration_ms: number; overhead_ms?: number | null; created_at: string; estimated?: boolean;
  /** The cost at the base price and credits − that (the city's margin); the alias asked for. */
  base_credits?: number; margin_credits?: number; alias?: string | null;
  /** The user API key the call was made with (accounts/keys). */
  key_id?: string | null;
}
export interface StatsRow {
  day?: string; city_id?: string | null; model?: string; calls: number; errors: number; input_tokens: number; output_tokens: number;
  cached_tokens: number; cache_write_tokens?: number; credits: number; usd: number; overhead_p50_ms: number | null; overhead_p99_ms: number | null;
  base_credits?: number; margin_credits?: number;
}
export interface Stats { from: string; to: string; group: string[]; items: StatsRow[]; totals: StatsRow; overhead_sample: { records: number; complete: boolean } }
export interface Who { kind: 'admin' | 'bureau'; city: City | null }

/**
 * Which identity a credential is. A bureau token carries its prefix, so each kind is checked
 * with one request it is allowed to make (no refused probe in the browser console): a bureau
 * reads its own city, the admin key the env list (a user token gets 403 there).
 */
export async function whoAmI(key: string): Promise<Who> {
  if (key.startsWith('cg_bureau_')) return { kind: 'bureau', city: await get<City>('cities/current', undefined, key) };
  try {
    await get('env/list', undefined, key);
  } catch (e) {
    if (e instanceof ApiError && e.status === 403) {
      throw new ApiError(403, e.code, 'This credential is not the admin key or a bureau token (a user token cannot open the console).');
    }
    throw e;
  }
  return { kind: 'admin', city: null };
}
