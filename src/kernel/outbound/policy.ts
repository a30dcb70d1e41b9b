// The one outbound-fetch policy: every URL a caller can make citygate fetch (the asr `url`,
// image and file URLs in messages, and each redirect they lead to) goes through fetchUntrusted.
//
//   scheme:    http and https only;
//   address:   public unicast only (address.ts). The runtime's guarded transport
//              (UpstreamHttp.untrusted) checks the address a name resolves to when it connects,
//              for every connection: on Node an undici Agent whose DNS lookup refuses other
//              addresses (runtimes/node/outbound-fetch.ts), so a name that resolves to 127.0.0.1
//              or 169.254.169.254 is refused however it is spelled, and a rebinding name cannot
//              pass a check and then connect elsewhere. On Workers the platform's fetch leaves
//              from Cloudflare's network, which has no route to a private network or metadata
//              service; literal addresses and `localhost` names are refused here on both;
//   redirects: followed here, by hand, at most AI_FETCH_MAX_REDIRECTS (5), each checked as above;
//   caps:      AI_FETCH_MAX_BYTES (25 MiB) and AI_FETCH_TIMEOUT_MS (30 s) for the whole fetch;
//   opt-in:    AI_FETCH_ALLOW_PRIVATE (`true`, or a list of CIDRs) for on-premise sources.
// No credentials, cookies or gateway headers are sent.
import type { RuntimeEnv } from '../runtime-env.ts';
import type { UpstreamHttp } from '../http.ts';
import { readStreamCapped } from '../input.ts';
import { isIpLiteral, parseAllowance, refusedRange, type AddressAllowance } from './address.ts';

/** What the runtime's guarded transport needs to judge a connection. */
export interface OutboundRules {
  allow: AddressAllowance;
  /** DNS servers to resolve callers' hosts with (AI_FETCH_DNS_SERVERS, `host[:port]`, comma-separated); empty: the system's. */
  dnsServers: string[];
  /** Identifies these rules (a transport keeps one connection pool per rule set). */
  key: string;
}

/** The error code a refused connection carries (the Node transport's lookup sets it). */
export const OUTBOUND_REFUSED = 'EOUTBOUND_REFUSED';

export type UnreadableReason = 'scheme' | 'refused' | 'status' | 'too_large' | 'timeout' | 'network' | 'redirects' | 'empty';

/** A caller's URL that citygate will not or could not read: always the caller's 4xx, never an upstream failure. */
export class UnreadableUrl extends Error {
  readonly reason: UnreadableReason;
  readonly status: number | undefined;
  constructor(reason: UnreadableReason, message: string, status?: number) {
    super(message);
    this.name = 'UnreadableUrl';
    this.reason = reason;
    this.status = status;
  }
}

export const DEFAULT_FETCH_MAX_BYTES = 25 * 1024 * 1024;
export const DEFAULT_FETCH_TIMEOUT_MS = 30_000;
export const DEFAULT_FETCH_MAX_REDIRECTS = 5;

let cached: { raw: string; rules: OutboundRules } | null = null;

/** The rules in force (AI_FETCH_ALLOW_PRIVATE, AI_FETCH_DNS_SERVERS), parsed again only when they change. */
export function outboundRules(env: RuntimeEnv): OutboundRules {
  const allow = env.get('AI_FETCH_ALLOW_PRIVATE') ?? '';
  const dns = env.get('AI_FETCH_DNS_SERVERS') ?? '';
  const raw = `${allow}\n${dns}`;
  if (cached?.raw !== raw) {
    const dnsServers = dns.split(',').map((s) => s.trim()).filter(Boolean);
    cached = { raw, rules: { allow: parseAllowance(allow), dnsServers, key: raw } };
  }
  return cached.rules;
}

function num(env: RuntimeEnv, key: string, dflt: number, min: number, max: number): number {
  const v = Number(env.get(key));
  return env.get(key) && Number.isFinite(v) && v >= min ? Math.min(max, v) : dflt;
}

/** Throws unless `url` may be fetched before any connection: its scheme and a literal or `localhost` host. */
export function checkUrl(url: URL, rules: OutboundRules): void {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UnreadableUrl('scheme', `only http and https URLs are fetched, not ${url.protocol.replace(/:$/, '')}`);
  const host = url.hostname.replace(/\.$/, '').toLowerCase();
  if (isIpLiteral(host)) {
    const why = refusedRange(host, rules.allow);
    if (why) throw new UnreadableUrl('refused', `its address is not a public one (${why})`);
  } else if (host === 'localhost' || host.endsWith('.localhost')) {
    if (!rules.allow.all) throw new UnreadableUrl('refused', 'its address is not a public one (loopback)');
  }
}

/** Whether a transport error (or one of its causes) is the guard refusing the address. */
function refusedOf(e: unknown): string | null {
  for (let x: any = e, i = 0; x && i < 5; x = x.cause, i++) if (x.code === OUTBOUND_REFUSED) return String(x.range ?? 'not public');
  return null;
}

export interface FetchedBytes {
  data: Uint8Array;
  mediaType: string | undefined;
}

/**
 * Fetches a caller's URL under the policy. Throws UnreadableUrl for anything the caller must
 * fix (refused, not found, too large, too slow); an abort by `signal` is thrown on as is.
 */
export async function fetchUntrusted(gw: { http: UpstreamHttp; env: RuntimeEnv }, url: URL | string, opts: { signal?: AbortSignal; maxBytes?: number } = {}): Promise<FetchedBytes> {
  const rules = outboundRules(gw.env);
  const maxBytes = Math.min(opts.maxBytes ?? Infinity, num(gw.env, 'AI_FETCH_MAX_BYTES', DEFAULT_FETCH_MAX_BYTES, 1, 1 << 30));
  const timeoutMs = num(gw.env, 'AI_FETCH_TIMEOUT_MS', DEFAULT_FETCH_TIMEOUT_MS, 1, 600_000);
  const maxRedirects = num(gw.env, 'AI_FETCH_MAX_REDIRECTS', DEFAULT_FETCH_MAX_REDIRECTS, 0, 20);
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  let current: URL;
  try {
    current = typeof url === 'string' ? new URL(url) : url;
  } catch {
    throw new UnreadableUrl('scheme', 'it is not a URL');
  }
  try {
    for (let hops = 0; ; hops++) {
      checkUrl(current, rules);
      const res = await gw.http.untrusted(current.href, { headers: { 'user-agent': 'citygate', accept: '*/*' }, signal, redirect: 'manual' }, rules);
      if (res.status >= 300 && res.status < 400 && res.headers.has('location')) {
        await res.body?.cancel().catch(() => {});
        if (hops >= maxRedirects) throw new UnreadableUrl('redirects', `it redirected more than ${maxRedirects} times`);
        try {
          current = new URL(res.headers.get('location')!, current);
        } catch {
          throw new UnreadableUrl('network', 'it redirected to something that is not a URL');
        }
        continue;
      }
      if (res.status < 200 || res.status >= 300) {
        await res.body?.cancel().catch(() => {});
        throw new UnreadableUrl('status', `it answered ${res.status}`, res.status);
      }
      const declared = Number(res.headers.get('content-length'));
      if (Number.isFinite(declared) && declared > maxBytes) {
        await res.body?.cancel().catch(() => {});
        throw new UnreadableUrl('too_large', `it is larger than ${maxBytes} bytes`);
      }
      const data = await readCapped(res, maxBytes);
      return { data, mediaType: res.headers.get('content-type') ?? undefined };
    }
  } catch (e) {
    if (e instanceof UnreadableUrl) throw e;
    if (opts.signal?.aborted) throw e;
    if (timeout.aborted) throw new UnreadableUrl('timeout', `it was not read within ${timeoutMs} ms`);
    const refused = refusedOf(e);
    if (refused) throw new UnreadableUrl('refused', `its address is not a public one (${refused})`);
    throw new UnreadableUrl('network', 'it could not be fetched');
  }
}

function readCapped(res: Response, maxBytes: number): Promise<Uint8Array> {
  if (!res.body) return Promise.resolve(new Uint8Array(0));
  return readStreamCapped(res.body, maxBytes, () => new UnreadableUrl('too_large', `it is larger than ${maxBytes} bytes`));
}
