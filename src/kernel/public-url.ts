// The gateway's public URL, for the URLs it hands to others (the OAuth redirect_uri and return_to
// check, payment result pages, generated files): GATEWAY_CITY_BASE_URL, never the Host header a
// caller sends. Without it, a request's own origin is used only where it cannot be spoofed:
//   'request'           Workers: Cloudflare delivers a request to a Worker only for a host routed
//                       to it, so the request URL's host is one of the Worker's own;
//   'loopback-request'  Node listening on loopback (development): the request's origin when its
//                       host is a loopback name or address (localhost, 127.x, [::1]);
//   'none'              Node listening on any other address: nothing; actions that need the
//                       URL answer 503 public_url_not_configured.
import { GatewayError } from './errors.ts';
import type { RuntimeEnv } from './runtime-env.ts';

export type PublicUrlFallback = 'request' | 'loopback-request' | 'none';

const LOOPBACK_HOST = /^(localhost|[a-z0-9.-]+\.localhost|127\.\d+\.\d+\.\d+|\[::1\])$/i;

/** The public origin, or null when it is not configured and the request's cannot be trusted. */
export function trustedOrigin(env: RuntimeEnv, fallback: PublicUrlFallback, req: Request | undefined): string | null {
  const configured = env.get('GATEWAY_CITY_BASE_URL');
  if (configured) {
    try {
      const u = new URL(configured);
      if (u.protocol === 'https:' || u.protocol === 'http:') return u.origin;
    } catch {
      /* not a URL: as if unset */
    }
    return null;
  }
  if (!req || fallback === 'none') return null;
  const u = new URL(req.url);
  if (fallback === 'request' || LOOPBACK_HOST.test(u.hostname)) return u.origin;
  return null;
}

export function publicUrlMissing(): GatewayError {
  return new GatewayError(
    503,
    'public_url_not_configured',
    'This gateway does not know its public URL: set GATEWAY_CITY_BASE_URL (e.g. https://gateway.example.com). It is never taken from the Host header.',
  );
}

/** gw.publicOrigin(req), or null instead of the 503 (for what can do without it). */
export function publicOriginOrNull(gw: { publicOrigin(req?: Request): string }, req?: Request): string | null {
  try {
    return gw.publicOrigin(req);
  } catch {
    return null;
  }
}
