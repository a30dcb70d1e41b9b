// The default cap on one user's AI calls in flight (streams above all: each holds an upstream
// connection for as long as it lasts), so that one user cannot take a process's capacity:
// RATE_LIMIT_USER_AI_CALLS (default 64, 0 = off), counted in this process's memory — no query,
// no write — from the call's reservation to its end (AiCall.finish). A city that sets its own
// `user_concurrency` (or an operator who sets RATE_LIMIT_USER_CONCURRENCY) replaces it with
// that exact limit across processes (kernel/rate-limit.ts), which can be higher or lower.
// Per process: with GATEWAY_WORKERS=N a user may hold up to N times the cap.
import type { GatewayContext } from '../../kernel/context.ts';
import { GatewayError } from '../../kernel/errors.ts';

export const DEFAULT_USER_AI_CALLS = 64;
/** A call older than this no longer counts (a leak must not lock a user out for good). */
const STALE_MS = 3_600_000;

interface Counted {
  readonly state: { readonly startedAt: number };
}

const live = new WeakMap<GatewayContext, Map<string, Set<Counted>>>();

function capOf(gw: GatewayContext, cityId: string): number {
  const limits = gw.cities.peek(cityId)?.settings.limits;
  if (limits?.user_concurrency != null) return 0; // the city's own (exact) limit applies instead
  if (Number(gw.env.get('RATE_LIMIT_USER_CONCURRENCY')) > 0) return 0;
  const raw = gw.env.get('RATE_LIMIT_USER_AI_CALLS');
  if (raw === undefined) return DEFAULT_USER_AI_CALLS;
  const n = Number(raw);
  return Number.isInteger(n) && n >= 0 ? n : DEFAULT_USER_AI_CALLS;
}

/** Counts `call` for its user; throws 429 when the user already has the cap in flight. The key to leave with, or null when not counted. */
export function enterCall(gw: GatewayContext, cityId: string, userId: string, call: Counted): string | null {
  const cap = capOf(gw, cityId);
  if (cap === 0) return null;
  let byUser = live.get(gw);
  if (!byUser) live.set(gw, (byUser = new Map()));
  const key = `${cityId}\x1f${userId}`;
  let calls = byUser.get(key);
  if (!calls) byUser.set(key, (calls = new Set()));
  if (calls.size >= cap) {
    const old = Date.now() - STALE_MS;
    for (const c of calls) if (c.state.startedAt < old) calls.delete(c);
    if (calls.size >= cap) {
      throw new GatewayError(429, 'rate_limited', `Too many AI calls in flight for this user (at most ${cap} at once). Retry when one has finished.`, {
        headers: { 'retry-after': '1' },
      });
    }
  }
  calls.add(call);
  return key;
}

export function leaveCall(gw: GatewayContext, key: string, call: Counted): void {
  const byUser = live.get(gw);
  const calls = byUser?.get(key);
  if (!calls) return;
  calls.delete(call);
  if (calls.size === 0) byUser!.delete(key);
}
