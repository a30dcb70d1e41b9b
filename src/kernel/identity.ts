// Who is calling: the bearer credential decides the identity.
export type IdentityKind = 'guest' | 'user' | 'admin' | 'bureau';

export type Identity =
  | { kind: 'guest' }
  | { kind: 'admin' }
  | { kind: 'bureau'; cityId: string; bureauId: string }
  | { kind: 'user'; cityId: string; userId: string; expiresAt: number; metadata?: Record<string, unknown> };

export const BUREAU_TOKEN_PREFIX = 'cg_bureau_';
export const ADMIN_KEY_PREFIX = 'cg_admin_';

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
