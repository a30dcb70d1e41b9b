// A tiny authoritative DNS server over UDP on 127.0.0.1 (RFC 1035 wire format): answers A and
// AAAA queries for the names it is given, NXDOMAIN for the rest. citygate resolves callers' hosts
// through it when AI_FETCH_DNS_SERVERS names it, so tests can give a hostname any address —
// e.g. one that resolves to loopback — without touching /etc/hosts.
import { createSocket } from 'node:dgram';
import { isIPv4 } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface DnsStub {
  /** `127.0.0.1:port`, for AI_FETCH_DNS_SERVERS. */
  server: string;
  /** Names asked for, lower-case, in order. */
  queries: string[];
  close(): Promise<void>;
}

function v6Bytes(a: string): number[] {
  const [head, tail = ''] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = a.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]);
}

/** `names`: host → addresses (IPv4 or IPv6), or a function giving them at each query (a name that changes its answer). */
export async function startDnsStub(names: Record<string, string[] | (() => string[])>): Promise<DnsStub> {
  const sock = createSocket('udp4');
  const queries: string[] = [];
  sock.on('message', (msg, rinfo) => {
    if (msg.length < 12) return;
    const labels: string[] = [];
    let i = 12;
    while (i < msg.length && msg[i] !== 0) {
      labels.push(msg.subarray(i + 1, i + 1 + msg[i]).toString('latin1'));
      i += msg[i] + 1;
    }
    const qEnd = i + 5; // zero byte, qtype, qclass
    const qtype = msg.readUInt16BE(i + 1);
    const name = labels.join('.').toLowerCase();
    queries.push(name);
    const entry = names[name];
    const known = typeof entry === 'function' ? entry() : entry;
    const want = known?.filter((a) => (qtype === 1 ? isIPv4(a) : qtype === 28 ? !isIPv4(a) : false)) ?? [];
    const answers = want.map((a) => {
      const rdata = isIPv4(a) ? a.split('.').map(Number) : v6Bytes(a);
      return Buffer.from([0xc0, 0x0c, 0, qtype, 0, 1, 0, 0, 0, 5, 0, rdata.length, ...rdata]);
    });
    const head = Buffer.alloc(12);
    msg.copy(head, 0, 0, 2); // id
    head.writeUInt16BE(0x8400 | (msg.readUInt16BE(2) & 0x0100) | (known ? 0 : 3), 2); // QR, AA, RD echoed, NXDOMAIN when unknown
    head.writeUInt16BE(1, 4);
    head.writeUInt16BE(answers.length, 6);
    sock.send(Buffer.concat([head, msg.subarray(12, qEnd), ...answers]), rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  sock.unref();
  return {
    server: `127.0.0.1:${(sock.address() as AddressInfo).port}`,
    queries,
    close: () => new Promise<void>((r) => sock.close(() => r())),
  };
}
