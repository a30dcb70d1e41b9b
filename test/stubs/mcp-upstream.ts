// An upstream MCP server for tests, built with the official SDK (McpServer on its Web-standard
// Streamable HTTP transport, stateless, one server per request) behind node:http on 127.0.0.1.
// It can demand a static secret header or an OAuth bearer token (its own /token endpoint grants
// client credentials), records the headers of each request (what citygate sends upstream), and
// can be slowed down, made to fail, or stopped to stand for a server that is down.
import { createServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { z } from 'zod';

export interface StubTool {
  name: string;
  description?: string;
  /** The text answered; gets the arguments. */
  answer?: (args: Record<string, unknown>) => string;
  /** Throws (a JSON-RPC error from the upstream) with this text. */
  fails?: string;
}

export interface McpStubOptions {
  name: string;
  tools: StubTool[];
  /** Demand this header (name → value) on every MCP request. */
  secretHeader?: [string, string];
  /** Serve /token (client credentials) and demand its bearer token. */
  oauth?: { clientId: string; clientSecret: string; expiresIn?: number };
}

export interface McpStub {
  url: string;
  origin: string;
  /** Headers of the MCP requests received (lower-case names). */
  requests: Record<string, string | string[] | undefined>[];
  /** Tool calls received, by tool name. */
  calls: Map<string, number>;
  tokensIssued: number;
  /** Delay every tools/call by this long (ms). */
  delayMs: number;
  /** The most tool calls that were in progress at once. */
  maxInFlight: number;
  /** Answer every MCP request with 503. */
  failing: boolean;
  /** Forget every OAuth token issued (the next request with one is a 401). */
  revokeTokens(): void;
  close(): Promise<void>;
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

export async function startMcpStub(o: McpStubOptions): Promise<McpStub> {
  const issued = new Set<string>();
  const stub: McpStub = { url: '', origin: '', requests: [], calls: new Map(), tokensIssued: 0, delayMs: 0, failing: false, revokeTokens: () => issued.clear(), maxInFlight: 0, close: async () => {} };
  let inFlight = 0;

  const build = () => {
    const server = new McpServer({ name: o.name, version: '1.0.0' });
    for (const t of o.tools) {
      server.registerTool(t.name, { description: t.description ?? `${t.name} of ${o.name}`, inputSchema: { text: z.string().optional() } }, async (args) => {
        stub.calls.set(t.name, (stub.calls.get(t.name) ?? 0) + 1);
        stub.maxInFlight = Math.max(stub.maxInFlight, ++inFlight);
        try {
          if (stub.delayMs) await new Promise((r) => setTimeout(r, stub.delayMs));
        } finally {
          inFlight--;
        }
        if (t.fails) throw new Error(t.fails);
        return { content: [{ type: 'text' as const, text: t.answer ? t.answer(args) : `${o.name}:${t.name}:${args.text ?? ''}` }] };
      });
    }
    return server;
  };

  const http: HttpServer = createServer(async (req, res) => {
    try {
      const body = await readAll(req);
      if (req.url === '/token' && o.oauth) {
        const auth = req.headers.authorization ?? '';
        const [id, secret] = Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString().split(':').map(decodeURIComponent);
        const form = new URLSearchParams(body.toString());
        if (form.get('grant_type') !== 'client_credentials' || id !== o.oauth.clientId || secret !== o.oauth.clientSecret) {
          res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_client' }));
          return;
        }
        const token = `tok_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
        issued.add(token);
        stub.tokensIssued++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: token, token_type: 'Bearer', expires_in: o.oauth.expiresIn ?? 3600 }));
        return;
      }
      if (req.url !== '/mcp') return void res.writeHead(404).end();
      stub.requests.push({ ...req.headers });
      if (stub.failing) return void res.writeHead(503, { 'content-type': 'text/plain' }).end('upstream is down');
      if (o.secretHeader && req.headers[o.secretHeader[0].toLowerCase()] !== o.secretHeader[1]) return void res.writeHead(401).end('missing secret header');
      if (o.oauth && !issued.has((req.headers.authorization ?? '').replace(/^Bearer /, ''))) return void res.writeHead(401, { 'www-authenticate': 'Bearer' }).end();
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
      const request = new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: req.method === "POST" ? new Uint8Array(body) : undefined });
      const server = build();
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      const answer = await transport.handleRequest(request);
      const out = Buffer.from(await answer.arrayBuffer());
      res.writeHead(answer.status, Object.fromEntries(answer.headers)).end(out);
      void server.close();
    } catch (e) {
      if (!res.headersSent) res.writeHead(500).end(String(e));
    }
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const port = (http.address() as AddressInfo).port;
  stub.origin = `http://127.0.0.1:${port}`;
  stub.url = `${stub.origin}/mcp`;
  stub.close = () =>
    new Promise<void>((r) => {
      http.closeAllConnections();
      http.close(() => r());
    });
  return stub;
}
