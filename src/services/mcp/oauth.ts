// OAuth 2.1 client credentials (RFC 6749 §4.4) for an upstream MCP server: citygate obtains
// the access token from the server's token endpoint with the city's client id and secret, keeps
// it in this process until shortly before it expires, and gets a new one then, or at once when
// the upstream answers 401 (forget()). The token endpoint is fetched under the outbound policy
// like the server itself. Tokens are per process (per isolate on Workers): never written down.
import type { GatewayContext } from '../../kernel/context.ts';
import { checkUrl, outboundRules } from '../../kernel/outbound/policy.ts';
import { heldSecret, scrub } from './secrets.ts';
import type { ServerAuth } from './store.ts';

type OAuth = Extract<ServerAuth, { type: 'oauth' }>;

/** Refresh this long before the token's expiry. */
const EARLY_MS = 30_000;

const tokens = new Map<string, { token: string; until: number } | Promise<{ token: string; until: number }>>();

const keyOf = (serverId: string, a: OAuth) => `${serverId}\x1f${a.token_url}\x1f${a.client_id}\x1f${a.client_secret}\x1f${a.scope ?? ''}`;

export class TokenError extends Error {}

export async function accessToken(gw: GatewayContext, serverId: string, a: OAuth, signal?: AbortSignal): Promise<string> {
  const k = keyOf(serverId, a);
  const hit = tokens.get(k);
  if (hit && !(hit instanceof Promise) && hit.until > Date.now()) return hit.token;
  if (hit instanceof Promise) return (await hit).token;
  const p = obtain(gw, a, signal);
  tokens.set(k, p);
  try {
    const t = await p;
    tokens.set(k, t);
    return t.token;
  } catch (e) {
    tokens.delete(k);
    throw e;
  }
}

/** The upstream refused `token`: the next call obtains a new one (unless another call already did). */
export function forgetToken(serverId: string, a: OAuth, token: string): void {
  const k = keyOf(serverId, a);
  const hit = tokens.get(k);
  if (hit && !(hit instanceof Promise) && hit.token === token) tokens.delete(k);
}

async function obtain(gw: GatewayContext, a: OAuth, signal?: AbortSignal): Promise<{ token: string; until: number }> {
  const rules = outboundRules(gw.env);
  const url = new URL(a.token_url);
  checkUrl(url, rules);
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (a.scope) form.set('scope', a.scope);
  if (a.audience) form.set('resource', a.audience); // RFC 8707: the token is for this server
  const basic = btoa(`${encodeURIComponent(a.client_id)}:${encodeURIComponent(a.client_secret)}`);
  const res = await gw.http.untrusted(
    url.href,
    {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', authorization: `Basic ${basic}` },
      body: form.toString(),
      redirect: 'manual',
      signal: signal ?? AbortSignal.timeout(15_000),
    },
    rules,
  );
  const text = await res.text();
  if (!res.ok) throw new TokenError(`the token endpoint answered ${res.status}: ${scrub(text.slice(0, 300))}`);
  let body: { access_token?: unknown; expires_in?: unknown; token_type?: unknown };
  try {
    body = JSON.parse(text);
  } catch {
    throw new TokenError('the token endpoint did not answer JSON');
  }
  if (typeof body.access_token !== 'string' || !body.access_token) throw new TokenError('the token endpoint answered no access_token');
  heldSecret(body.access_token);
  const life = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in * 1000 : 3_600_000;
  return { token: body.access_token, until: Date.now() + Math.max(1000, life - EARLY_MS) };
}
