// Who is calling: the bearer credential decides the identity.
import type { WindowSpec } from './windows.ts';

export type IdentityKind = 'guest' | 'user' | 'admin' | 'bureau';

export type Identity =
  | { kind: 'guest' }
  | { kind: 'admin' }
  | { kind: 'bureau'; cityId: string; bureauId: string }
  | { kind: 'user'; cityId: string; userId: string; expiresAt: number; metadata?: Record<string, unknown>; keyId?: string; key?: KeyLimits };

/**
 * A user API key's own limits (accounts/keys, kernel/user-keys.ts), applied on top of the city's
 * and the user's. Built once per key and shared by every call made with it: never mutated.
 */
export interface KeyLimits {
  /** Model ids or aliases the key may call; null: any the city allows. */
  models: readonly string[] | null;
  /** Client addresses the key is accepted from; null: any. */
  ips: ((ip: string) => boolean) | null;
  /** Requests per minute (POST actions), null: no limit of its own. */
  rpm: number | null;
  /** Credits it may spend, in total (window null) or per rolling window; `windows`: the same for
   *  the rolling-windows engine (kernel/windows.ts), one array per key (the engine caches by it). */
  budget: { credits: number; window: KeyBudgetWindow | null; windows: readonly WindowSpec[] } | null;
}

export type KeyBudgetWindow = 'day' | 'week' | '30d';

export const BUREAU_TOKEN_PREFIX = 'cg_bureau_';
export const ADMIN_KEY_PREFIX = 'cg_admin_';
/** Users' API keys: `cg_key_<id>_<secret>` (kernel/user-keys.ts). */
export const USER_KEY_PREFIX = 'cg_key_';

/** The bearer token of a request, or null. */
export function bearer(req: Request): string | null {
  const h = req.headers.get('authorization');
  if (!h) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1] : '';
}

/** The city an identity is bound to (users and bureaus), else null. */
export function boundCity(id: Identity): string | null {
  return id.kind === 'user' || id.kind === 'bureau' ? id.cityId : null;
}
