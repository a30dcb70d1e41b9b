// A city's backend receiving citygate's webhooks: a node:http server on 127.0.0.1 that records
// every delivery (headers and raw body) and answers what the test's plan says (200 unless
// told otherwise), e.g. "fail the first 3 deliveries of each event".
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
  /** What the receiver answered. */
  answered: number;
}

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** The status to answer a delivery with; `n` counts this event id's deliveries (1 = first). */
  plan: (d: { id: string; body: string; n: number }) => number;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const seen = new Map<string, number>();
  const r: Receiver = { url: '', deliveries: [], plan: () => 200, close: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id'] ?? '');
      const n = (seen.get(id) ?? 0) + 1;
      seen.set(id, n);
      const answered = r.plan({ id, body, n });
      r.deliveries.push({ headers: req.headers, body, at: Date.now(), answered });
      res.writeHead(answered, { 'content-type': 'text/plain' });
      res.end(answered < 300 ? 'ok' : `receiver says no (${answered})`);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  r.close = () =>
    new Promise((ok) => {
      server.closeAllConnections();
      server.close(() => ok());
    });
  return r;
}
