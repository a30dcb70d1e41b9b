// Talking to an upstream MCP server: the official SDK's client over Streamable HTTP, through a
// fetch that (1) goes out by the outbound policy's guarded transport (the server's address is
// checked at connect time, like every URL a caller can make citygate fetch), (2) carries only
// the server's own credentials — nothing of the caller's request is ever copied into it — and
// (3) never opens the server-initiated GET stream: citygate relays no notifications, so it
// answers that GET itself with 405, as a stateless server would.
//
// Node keeps one connected client per server per process (reused: no initialize round trip
// per call); a client whose session the upstream forgot (404) is dropped and connected again.
// On Workers (no graceful stop) nothing outlives a request: each call connects afresh.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { GatewayContext } from '../../kernel/context.ts';
import { checkUrl, DEFAULT_FETCH_MAX_BYTES, outboundRules, UnreadableUrl } from '../../kernel/outbound/policy.ts';
import { accessToken, forgetToken } from './oauth.ts';
import { openAuth, type ServerAuth, type ServerRow } from './store.ts';

const VERSION = '0.1.0';

const clients = new Map<string, Promise<Client>>();
const keyOf = (row: ServerRow) => `${row.server_id}\x1f${row.updated_at}`;

/** The most an upstream's answer may hold: AI_FETCH_MAX_BYTES, as for every fetch under the policy. */
function maxBytes(gw: GatewayContext): number {
  const v = Number(gw.env.get('AI_FETCH_MAX_BYTES'));
  return Number.isFinite(v) && v >= 1 ? v : DEFAULT_FETCH_MAX_BYTES;
}

/** The answer, cut off with an error past `max` bytes (declared or counted): an upstream cannot fill the process's memory. */
function capped(res: Response, max: number): Response {
  const declared = Number(res.headers.get('content-length'));
  const tooLarge = () => new UnreadableUrl('too_large', `the MCP server's answer is larger than ${max} bytes`);
  if (Number.isFinite(declared) && declared > max) {
    void res.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!res.body) return res;
  let n = 0;
  const body = res.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        n += chunk.byteLength;
        if (n > max) c.error(tooLarge());
        else c.enqueue(chunk);
      },
    }),
  );
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** A fetch for one server: guarded, with its credentials, without the GET stream, its answers capped. */
function serverFetch(gw: GatewayContext, row: Pick<ServerRow, 'server_id' | 'url'>, auth: ServerAuth): typeof fetch {
  const rules = outboundRules(gw.env);
  checkUrl(new URL(row.url), rules);
  const send = async (input: string | URL | Request, init: RequestInit | undefined, token: string | null): Promise<Response> => {
    const headers = new Headers(init?.headers);
    if (auth.type === 'headers') for (const [k, v] of Object.entries(auth.headers)) headers.set(k, v);
    if (token !== null) headers.set('authorization', `Bearer ${token}`);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    return capped(await gw.http.untrusted(url, { ...init, headers, redirect: 'manual' }, rules), maxBytes(gw));
  };
  const token = () => (auth.type === 'oauth' ? accessToken(gw, row.server_id, auth) : null);
  return (async (input: string | URL | Request, init?: RequestInit) => {
    if ((init?.method ?? 'GET').toUpperCase() === 'GET') return new Response(null, { status: 405, headers: { allow: 'POST' } });
    const used = await token();
    const res = await send(input, init, used);
    // An expired or revoked token: one more try with a new one (obtained once for all the calls refused with it).
    if (res.status === 401 && auth.type === 'oauth' && used !== null) {
      await res.body?.cancel().catch(() => {});
      forgetToken(row.server_id, auth, used);
      return send(input, init, await token());
    }
    return res;
  }) as typeof fetch;
}

/** A new connected client (initialize done) for the server. */
export async function connect(gw: GatewayContext, row: ServerRow, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<Client> {
  const auth = await openAuth(gw, row);
  const transport = new StreamableHTTPClientTransport(new URL(row.url), { fetch: serverFetch(gw, row, auth), reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 } });
  const client = new Client({ name: 'citygate', version: VERSION }, { capabilities: {} });
  client.onerror = () => {}; // transport noise (the refused GET stream); calls report their own errors
  try {
    await client.connect(transport, { timeout: opts.timeoutMs ?? row.timeout_ms, signal: opts.signal });
  } catch (e) {
    await client.close().catch(() => {});
    throw e;
  }
  return client;
}

/** A connected client for the server: this process's (Node), or a new one (Workers). */
export function clientFor(gw: GatewayContext, row: ServerRow, signal?: AbortSignal): { client: Promise<Client>; done(): void; drop(): void } {
  if (!gw.config.gracefulStop) {
    const client = connect(gw, row, { signal });
    const close = () => void client.then((c) => c.close()).catch(() => {});
    return { client, done: close, drop: close };
  }
  const k = keyOf(row);
  let client = clients.get(k);
  if (!client) {
    for (const [old, c] of clients) if (old.startsWith(`${row.server_id}\x1f`)) (clients.delete(old), void c.then((x) => x.close()).catch(() => {}));
    client = connect(gw, row);
    clients.set(k, client);
    client.catch(() => clients.delete(k));
  }
  const mine = client;
  return {
    client: mine,
    done() {},
    drop() {
      if (clients.get(k) === mine) clients.delete(k);
      void mine.then((c) => c.close()).catch(() => {});
    },
  };
}

/** Forget this process's client of a server (changed or removed). */
export function dropServer(serverId: string): void {
  for (const [k, c] of clients) if (k.startsWith(`${serverId}\x1f`)) (clients.delete(k), void c.then((x) => x.close()).catch(() => {}));
}

/** Closes every cached client (graceful stop). */
export async function closeAll(): Promise<void> {
  const all = [...clients.values()];
  clients.clear();
  await Promise.allSettled(all.map((c) => c.then((x) => x.close())));
}
