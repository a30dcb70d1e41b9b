// A recording proxy between a real client and citygate, for the fixtures of npm test's replays
// (test/ai/agent-replay.test.ts): every request as the client sent it — its path, the headers
// that say who sent it, its JSON body — then passed on unchanged and answered with citygate's
// answer. Credentials are never recorded.
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Recorded {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: any;
}

const KEPT = ['content-type', 'user-agent', 'x-goog-api-client'];

export async function startRecorder(target: string): Promise<{ url: string; requests: Recorded[]; close(): Promise<void> }> {
  const to = new URL(target);
  const requests: Recorded[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: any = null;
      try {
        body = raw.length ? JSON.parse(raw.toString('utf8')) : null;
      } catch {
        body = raw.toString('utf8');
      }
      const headers = Object.fromEntries(KEPT.filter((k) => typeof req.headers[k] === 'string').map((k) => [k, req.headers[k] as string]));
      // the path without its credential (?key=)
      const u = new URL(req.url ?? '/', 'http://recorder.invalid');
      u.searchParams.delete('key');
      requests.push({ method: req.method ?? 'GET', path: u.pathname + u.search, headers, body });
      const up = request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: { ...req.headers, host: to.host } }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', () => res.destroy());
      up.end(raw);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
