// A key as callers see it (KeyView): never its secret or hash; its status by the clock
// (expired), and with a budget what it has spent in the current window.
import type { GatewayContext } from '../../../kernel/context.ts';
import { USER_KEY_PREFIX } from '../../../kernel/identity.ts';
import { KEY_WINDOWS, type KeyView } from './schemas.ts';
import type { KeyRow } from './store.ts';
import { keySpent } from './spent.ts';

const iso = (t: number | null) => (t == null ? null : new Date(Number(t)).toISOString());

function list(text: string | null): string[] | null {
  if (text == null) return null;
  try {
    const v = JSON.parse(text);
    return Array.isArray(v) ? v.map(String) : null;
  } catch {
    return null;
  }
}

export async function keyViews(gw: GatewayContext, rows: KeyRow[]): Promise<KeyView[]> {
  const now = Date.now();
  const spent = await Promise.all(rows.map((r) => keySpent(gw, r)));
  return rows.map((r, i) => ({
    id: r.key_id,
    name: r.name,
    prefix: `${USER_KEY_PREFIX}${r.key_id}`,
    city_id: r.city_id,
    user_id: r.user_id,
    models: list(r.models),
    budget: r.budget_credits == null ? null : { credits: Number(r.budget_credits), window: (r.budget_window as (typeof KEY_WINDOWS)[number] | null) ?? null },
    spent: spent[i],
    expires_at: iso(r.expires_at),
    allowed_ips: list(r.allowed_ips),
    rpm: r.rpm == null ? null : Number(r.rpm),
    status: r.status === 'revoked' ? 'revoked' : r.expires_at != null && Number(r.expires_at) <= now ? 'expired' : 'active',
    created_at: iso(r.created_at)!,
    last_used_at: iso(r.last_used_at),
  }));
}
