// Slow and greedy clients on the Node server: deadlines for a request's headers and for the
// whole request (headers and body), the keep-alive idle time between requests, and caps on
// concurrent connections in total and per client address. Node checks the deadlines itself
// (one sweep of its connection list every HTTP_CHECK_INTERVAL_MS, no timer per request), and a
// cut request is answered in the one error shape when nothing was written yet: 408
// request_timeout. A connection over a cap is answered (503 over the total, 429 over the per-address cap, too_many_connections) and closed
// before anything of it is read. All are per process (GATEWAY_WORKERS=N: N times the caps).
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { intSetting } from './config.ts';

export interface ConnectionLimits {
  /** HTTP_HEADERS_TIMEOUT_MS (default 10 s): the request line and headers must arrive within it. */
  headersTimeoutMs: number;
  /** HTTP_REQUEST_TIMEOUT_MS (default 60 s): the whole request, body included, must arrive within it. */
  requestTimeoutMs: number;
  /** HTTP_KEEP_ALIVE_TIMEOUT_MS (default 5 s): an idle keep-alive connection is closed after it. */
  keepAliveTimeoutMs: number;
  /** HTTP_MAX_CONNECTIONS (default 10,000; 0 = no cap): open connections of this process. */
  maxConnections: number;
  /** HTTP_MAX_CONNECTIONS_PER_IP (default 1024 — a product's backend may hold hundreds —, 0 = no cap; default 0 behind TRUST_PROXY): open connections from one address. */
  maxConnectionsPerIp: number;
  /** HTTP_CHECK_INTERVAL_MS (default 1 s): how often Node looks for requests past their deadline. */
  checkIntervalMs: number;
}

export function readConnectionLimits(env: NodeJS.ProcessEnv): ConnectionLimits {
  const requestTimeoutMs = intSetting(env, 'HTTP_REQUEST_TIMEOUT_MS', 60_000, 1, 3_600_000);
  const behindProxy = Number(env.TRUST_PROXY) > 0;
  return {
    // Node requires headersTimeout ≤ requestTimeout
    headersTimeoutMs: Math.min(intSetting(env, 'HTTP_HEADERS_TIMEOUT_MS', 10_000, 1, 3_600_000), requestTimeoutMs),
    requestTimeoutMs,
    keepAliveTimeoutMs: intSetting(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000, 1, 3_600_000),
    maxConnections: intSetting(env, 'HTTP_MAX_CONNECTIONS', 10_000, 0, 10_000_000),
    maxConnectionsPerIp: intSetting(env, 'HTTP_MAX_CONNECTIONS_PER_IP', behindProxy ? 0 : 1024, 0, 10_000_000),
    checkIntervalMs: intSetting(env, 'HTTP_CHECK_INTERVAL_MS', 1_000, 10, 60_000),
  };
}

/** Options for http.createServer (the deadlines Node enforces itself). */
export function serverOptions(l: ConnectionLimits) {
  return {
    headersTimeout: l.headersTimeoutMs,
    requestTimeout: l.requestTimeoutMs,
    keepAliveTimeout: l.keepAliveTimeoutMs,
    connectionsCheckingInterval: l.checkIntervalMs,
  };
}

/** A whole HTTP/1.1 answer in the one error shape, written to a socket that has written nothing yet. */
function rawError(status: number, reason: string, type: string, code: string, message: string): string {
  const body = JSON.stringify({ error: { type, code, message } });
  return `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

const TIMEOUT = rawError(408, 'Request Timeout', 'invalid_request_error', 'request_timeout', 'The request (its headers or its body) did not arrive in time.');
const TOO_LARGE_HEAD = rawError(431, 'Request Header Fields Too Large', 'invalid_request_error', 'headers_too_large', 'The request headers are too large.');
const MALFORMED = rawError(400, 'Bad Request', 'invalid_request_error', 'malformed_request', 'The request is not valid HTTP.');
const BUSY = rawError(503, 'Service Unavailable', 'api_error', 'too_many_connections', 'Too many open connections; try again later.');
const BUSY_IP = rawError(429, 'Too Many Requests', 'rate_limit_error', 'too_many_connections', 'Too many open connections from this address; close some and try again.');

/** Marks a connection refused over a cap: its requests are never handed to the gateway. */
const REFUSED = Symbol('citygate.refused');

/** Whether a connection was refused over a cap (nothing of it may be served, an upgrade neither). */
export const isRefused = (socket: Socket): boolean => (socket as Socket & { [REFUSED]?: true })[REFUSED] === true;

/**
 * A createServer for @hono/node-server's serve(): Node's, with the deadlines and caps installed.
 * A request on a refused connection is dropped before the gateway sees it (one property read).
 */
export function limitedCreateServer(l: ConnectionLimits) {
  return (opts: ServerOptions, listener: RequestListener): Server => {
    const server = createServer({ ...opts, ...serverOptions(l) }, (req: IncomingMessage, res: ServerResponse) => {
      if ((req.socket as Refusable)[REFUSED]) return void req.socket.destroy();
      listener(req, res);
    });
    installConnectionLimits(server, l);
    return server;
  };
}

/** Installs the caps and the error answers on a server made with serverOptions(l). */
export function installConnectionLimits(server: Server, l: ConnectionLimits): void {
  // Node's own answer to a timed-out request has no body: ours is in the one error shape.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if ((socket as Refusable)[REFUSED]) return; // answered already: the parser errs again on each chunk it is still given
    const answer = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? TIMEOUT : err.code === 'HPE_HEADER_OVERFLOW' ? TOO_LARGE_HEAD : err.code === 'ECONNRESET' ? null : MALFORMED;
    // As Node's own handler: an answer only where no answer of this connection is half written
    // (a reused keep-alive connection has written earlier answers; that is no reason to reset it).
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (answer && socket.writable && !inFlight?.headersSent) refuse(socket, answer);
    else socket.destroy();
  });
  if (!l.maxConnections && !l.maxConnectionsPerIp) return;
  let open = 0;
  const byIp = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const ip = socket.remoteAddress ?? '';
    const mine = (byIp.get(ip) ?? 0) + 1;
    if (l.maxConnections && open >= l.maxConnections) return refuse(socket, BUSY);
    if (l.maxConnectionsPerIp && mine > l.maxConnectionsPerIp) return refuse(socket, BUSY_IP);
    open++;
    byIp.set(ip, mine);
    socket.once('close', () => {
      open--;
      const n = (byIp.get(ip) ?? 1) - 1;
      if (n <= 0) byIp.delete(ip);
      else byIp.set(ip, n);
    });
  });
}

type Refusable = Socket & { [REFUSED]?: true };

/** Lingering close (nginx's lingering_time / lingering_timeout): how long and how much we read after an answer. */
const LINGER_MS = 5_000;
const LINGER_IDLE_MS = 1_000;
const LINGER_MAX_BYTES = 2 * 1024 * 1024;

/**
 * Writes the answer, half-closes, then reads and discards what the client is still sending
 * until it closes its side, goes quiet for LINGER_IDLE_MS, has sent LINGER_MAX_BYTES or
 * LINGER_MS have passed; only then is the socket destroyed. Destroying a socket with unread
 * input makes the kernel send a reset, and a reset discards the answer the client has not
 * read yet: the client would see ECONNRESET instead of the 4xx.
 */
function refuse(socket: Socket, answer: string): void {
  (socket as Refusable)[REFUSED] = true;
  socket.on('error', () => {});
  socket.removeAllListeners('data'); // the HTTP parser reads no more of this connection
  let read = 0;
  const close = () => {
    clearTimeout(total);
    clearTimeout(idle);
    socket.destroy();
  };
  const total = setTimeout(close, LINGER_MS).unref();
  const idle = setTimeout(close, LINGER_IDLE_MS).unref();
  socket.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read > LINGER_MAX_BYTES) return close();
    idle.refresh();
  });
  socket.once('end', () => (socket.writableFinished ? close() : socket.once('finish', close))); // the answer goes out whole first
  socket.once('close', close);
  socket.end(answer);
  socket.resume();
}
