// The Node transport of the outbound-fetch policy (kernel/outbound/policy.ts): undici's fetch
// over an Agent whose DNS lookup refuses any address that is not public. net/tls call the lookup
// for every connection they open, so the address is checked after resolution and at connect
// time: for the first request, for each redirect (the policy follows them by hand) and for a
// name that resolves differently the second time (DNS rebinding). A name with any refused
// address is refused whole, so the connection cannot fall back to the bad one.
// The policy refuses IP literals before this point (net skips the lookup for them).
import { lookup as systemLookup, Resolver } from 'node:dns';
import type { LookupAddress, LookupAllOptions, LookupOptions } from 'node:dns';
import { Agent, fetch as undiciFetch } from 'undici';
import { refusedRange } from '../../kernel/outbound/address.ts';
import { OUTBOUND_REFUSED, type OutboundRules } from '../../kernel/outbound/policy.ts';

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** Resolves with the servers the rules name (AI_FETCH_DNS_SERVERS), else the system's resolver (getaddrinfo, /etc/hosts). */
function resolverOf(rules: OutboundRules): (host: string, cb: (err: NodeJS.ErrnoException | null, all: LookupAddress[]) => void) => void {
  if (!rules.dnsServers.length) return (host, cb) => systemLookup(host, { all: true, verbatim: true }, (err, all) => cb(err, all ?? []));
  const r = new Resolver({ timeout: 5000, tries: 2 });
  r.setServers(rules.dnsServers);
  return (host, cb) => {
    let pending = 2;
    const all: LookupAddress[] = [];
    let firstErr: NodeJS.ErrnoException | null = null;
    const done = (family: 4 | 6) => (err: NodeJS.ErrnoException | null, addrs: string[]) => {
      if (err) firstErr ??= err;
      else for (const address of addrs) all.push({ address, family });
      if (--pending === 0) cb(all.length ? null : (firstErr ?? Object.assign(new Error(`queryA ENOTFOUND ${host}`), { code: 'ENOTFOUND' })), all);
    };
    r.resolve4(host, done(4));
    r.resolve6(host, done(6));
  };
}

/** A dns.lookup-shaped function that only ever hands net public addresses. */
export function guardedLookup(rules: OutboundRules) {
  const resolve = resolverOf(rules);
  return (hostname: string, options: LookupOptions | LookupAllOptions | LookupCallback, callback?: LookupCallback) => {
    const cb = (typeof options === 'function' ? options : callback) as LookupCallback;
    const opts = (typeof options === 'function' ? {} : options) as LookupOptions;
    resolve(hostname, (err, all) => {
      if (err) return cb(err, []);
      const wanted = opts.family === 4 || opts.family === 6 ? all.filter((a) => a.family === opts.family) : all;
      for (const a of all) {
        const range = refusedRange(a.address, rules.allow);
        if (range) return cb(Object.assign(new Error(`${hostname} resolves to an address that is not public (${range})`), { code: OUTBOUND_REFUSED, range }), []);
      }
      if (!wanted.length) return cb(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
      if (opts.all) cb(null, wanted);
      else cb(null, wanted[0].address, wanted[0].family);
    });
  };
}

/**
 * Callers' URLs are many origins, fetched rarely; MCP servers (services/mcp) are few origins with
 * calls that can each take seconds: up to 64 connections per origin (opened only when needed).
 */
const agents = new Map<string, Agent>();

function agentFor(rules: OutboundRules): Agent {
  let a = agents.get(rules.key);
  if (!a) {
    for (const old of agents.values()) void old.close().catch(() => {}); // the rules changed: one pool at a time
    agents.clear();
    a = new Agent({ connections: 64, keepAliveTimeout: 4_000, keepAliveMaxTimeout: 10_000, connect: { lookup: guardedLookup(rules) as never, timeout: 10_000 } });
    agents.set(rules.key, a);
  }
  return a;
}

export function guardedFetch(url: string, init: RequestInit, rules: OutboundRules): Promise<Response> {
  return undiciFetch(url, { ...(init as object), dispatcher: agentFor(rules) }) as unknown as Promise<Response>;
}

export async function closeGuardedAgents(): Promise<void> {
  const all = [...agents.values()];
  agents.clear();
  await Promise.all(all.map((a) => a.close().catch(() => {})));
}
