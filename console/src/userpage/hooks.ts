// What the users' page's sections share: the city (from the path /u/<city_id>/ and
// cities/page), the API shapes they read, a poll while the tab shows, and reading what the
// gateway sent the browser back with. Sections import this module, never one another.
import { useEffect } from 'preact/hooks';

export interface PageCity {
  city_id: string;
  name: string;
  status: 'active' | 'paused';
  logo_url: string | null;
  accent_color: string | null;
}

/** The city id of this page, from /u/<city_id>/ (null anywhere else). */
export function cityIdFromPath(path = location.pathname): string | null {
  const m = /^\/u\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})\/?$/.exec(path);
  return m ? m[1] : null;
}

/** Calls f every `ms` while the tab is visible, and at once when it becomes visible again. */
export function usePoll(f: () => void, ms: number, deps: unknown[] = []) {
  useEffect(() => {
    const tick = () => document.visibilityState === 'visible' && f();
    const timer = setInterval(tick, ms);
    document.addEventListener('visibilitychange', tick);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', tick);
    };
  }, deps);
}

/** Reads query parameters the gateway sent the browser back with, and removes them from the address bar and history. */
export function takeReturnParams(names: string[]): Record<string, string> {
  const url = new URL(location.href);
  const out: Record<string, string> = {};
  for (const n of names) {
    const v = url.searchParams.get(n);
    if (v !== null) out[n] = v;
    url.searchParams.delete(n);
  }
  if (Object.keys(out).length) history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  return out;
}

// Shapes of the /v1 answers the page reads (besides api.ts's).
export interface Balance { city_id: string; user_id: string; credits: number; usd: number; budget?: { credits: number; period: string; spent: number; remaining: number; resets_at: string } }
export interface Provider { id: string; name: string; type: 'local' | 'oauth' }
export interface PayMethod { method: 'a' | 'b'; provider: string; name: string; enabled: boolean; reason?: string }
export interface DailyRow { day: string; calls: number; errors: number; input_tokens: number; output_tokens: number; credits: number }

/** A user's API key as accounts/keys/* answer it (MESSAGES.md, key actions). */
export interface KeyView {
  id: string;
  name: string;
  prefix: string;
  city_id: string;
  user_id: string;
  models: string[] | null;
  budget: { credits: number; window?: 'day' | 'week' | '30d' } | null;
  spent: { credits: number; window_start?: string; resets_at?: string } | null;
  expires_at: string | null;
  allowed_ips: string[] | null;
  rpm: number | null;
  status: 'active' | 'revoked' | 'expired';
  created_at: string;
  last_used_at: string | null;
}

/** Black or white text, whichever reads better on the colour (#rgb or #rrggbb). */
export function textOn(hex: string): string {
  const h = hex.length === 4 ? hex.slice(1).replace(/./g, (c) => c + c) : hex.slice(1);
  const [r, g, b] = [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16) / 255).map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.4 ? '#111827' : '#ffffff';
}
