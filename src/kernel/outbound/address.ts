// Which IP addresses a caller's URL may make citygate connect to: public unicast only. The
// classification is ipaddr.js's (the IANA special-purpose registries), not hand-written parsing.
// Addresses that embed an IPv4 address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d,
// NAT64 64:ff9b::a.b.c.d) are judged by the IPv4 address they carry; 6to4 and Teredo, which
// tunnel to an address a router picks, are refused outright.
import ipaddr from 'ipaddr.js';

type Addr = ipaddr.IPv4 | ipaddr.IPv6;

/** Ranges an operator can let through (AI_FETCH_ALLOW_PRIVATE): everything, or a list of CIDRs. */
export interface AddressAllowance {
  all: boolean;
  cidrs: [Addr, number][];
}

export const NO_ALLOWANCE: AddressAllowance = { all: false, cidrs: [] };

/**
 * AI_FETCH_ALLOW_PRIVATE: unset/false → nothing; `true` → every address; else a comma list of
 * addresses or CIDRs (`10.1.0.0/16,fd00::/8,192.168.1.5`). A malformed entry is ignored.
 */
export function parseAllowance(raw: string | undefined): AddressAllowance {
  const v = (raw ?? '').trim();
  if (!v || /^(false|0|no|off)$/i.test(v)) return NO_ALLOWANCE;
  if (/^(true|1|yes|on)$/i.test(v)) return { all: true, cidrs: [] };
  const cidrs: [Addr, number][] = [];
  for (const part of v.split(',')) {
    const p = part.trim();
    if (!p) continue;
    try {
      cidrs.push(p.includes('/') ? ipaddr.parseCIDR(p) : [ipaddr.process(p), ipaddr.process(p).kind() === 'ipv4' ? 32 : 128]);
    } catch {
      /* not an address: ignored */
    }
  }
  return { all: false, cidrs };
}

/** The IPv4 address an IPv6 address carries in its low 32 bits. */
function low32(a: ipaddr.IPv6): ipaddr.IPv4 {
  const b = a.toByteArray();
  return new ipaddr.IPv4(b.slice(12) as [number, number, number, number]);
}

/** The address as citygate judges it: IPv4-mapped/compatible and NAT64 forms as their IPv4 address. */
function effective(a: Addr): Addr {
  if (a.kind() === 'ipv6') {
    const v6 = a as ipaddr.IPv6;
    const range = v6.range();
    if (range === 'ipv4Mapped') return low32(v6);
    // 64:ff9b::/96 (RFC 6052's well-known NAT64 prefix); 64:ff9b:1::/48 (local-use) stays refused
    if (range === 'rfc6052' && v6.match(ipaddr.parseCIDR('64:ff9b::/96'))) return low32(v6);
  }
  return a;
}

/**
 * Why `ip` is refused (its range: loopback, private, linkLocal, carrierGradeNat, multicast,
 * unspecified, broadcast, reserved, uniqueLocal, 6to4, teredo …), or null when a caller's URL
 * may reach it. `allow` lets an operator's ranges through.
 */
export function refusedRange(ip: string, allow: AddressAllowance = NO_ALLOWANCE): string | null {
  let a: Addr;
  try {
    a = effective(ipaddr.parse(ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '')));
  } catch {
    return 'not an IP address';
  }
  const range = a.range();
  if (range === 'unicast') return null;
  if (allow.all) return null;
  for (const [net, bits] of allow.cidrs) if (net.kind() === a.kind() && a.match(net, bits)) return null;
  return range;
}

/** Whether a URL host (as `URL.hostname` gives it) is an IP literal rather than a name. */
export function isIpLiteral(host: string): boolean {
  return ipaddr.isValid(host.replace(/^\[|\]$/g, ''));
}
