// Responses over WebSocket on the Node server (services/ai/responses/websocket/turns.ts is the
// protocol): GET /v1/responses or /v1/ai/responses with `Upgrade: websocket`, on the gateway's
// own port. Other upgrade requests are served as ordinary requests (server.shouldUpgradeCallback).
//   - the credential is checked at the upgrade (401 in the one error shape, no socket);
//   - a socket is a connection: it counts against HTTP_MAX_CONNECTIONS(_PER_IP) for its whole
//     life (a refused connection never upgrades), and each turn is an AI call in flight,
//     counted against the user's concurrency caps while it runs;
//   - WS_IDLE_TIMEOUT_MS (default 300 s, 0 = none) without a turn running: closed, code 1000;
//   - RESPONSES_WEBSOCKET=off refuses every upgrade (405 websocket_not_supported, as on Workers);
//   - on the drain (SIGTERM) idle sockets close at once and busy ones when their turn has
//     finished, code 1001 (going away); past SHUTDOWN_TIMEOUT_MS the turn's stream is ended
//     like any other (its error event, charged by the estimate) and the socket cut.
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { authenticate } from '../../kernel/authenticate.ts';
import type { Gateway } from '../../kernel/gateway.ts';
import { ResponsesTurns } from '../../services/ai/responses/websocket/turns.ts';
import { intSetting } from './config.ts';
import { isRefused } from './connection-limits.ts';

const PATHS = new Set(['/v1/responses', '/v1/ai/responses']);
/** As the HTTP action's body limit. */
const MAX_MESSAGE_BYTES = 32 * 1024 * 1024;
/** Headers of the upgrade that are not the turn's. */
const HOP = /^(connection|upgrade|content-length|transfer-encoding|keep-alive|sec-websocket-.*)$/i;

export interface ResponsesSockets {
  /** Open sockets. */
  readonly size: number;
  /** The drain: idle sockets close now, busy ones after their turn. */
  drain(): void;
  /** Past the drain's deadline: every socket is cut. */
  terminate(): void;
}

function refuse(socket: Socket, status: number, reason: string, type: string, code: string, message: string): void {
  const body = JSON.stringify({ error: { type, code, message } });
  socket.on('error', () => {});
  socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

const pathOf = (url: string | undefined) => {
  const q = (url ?? '').indexOf('?');
  return q === -1 ? (url ?? '') : url!.slice(0, q);
};

export function installResponsesSockets(server: Server, gateway: Gateway, env: NodeJS.ProcessEnv): ResponsesSockets {
  const idleMs = intSetting(env, 'WS_IDLE_TIMEOUT_MS', 300_000, 0, 86_400_000);
  // RESPONSES_WEBSOCKET=off: refused as on Workers (e.g. behind a proxy that cannot carry WebSockets); clients use HTTP
  const enabled = !/^(off|false|0)$/i.test(env.RESPONSES_WEBSOCKET ?? '');
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES, perMessageDeflate: false });
  const open = new Map<WebSocket, ResponsesTurns>();
  let draining = false;

  // only a WebSocket upgrade of the Responses paths is taken; any other is an ordinary request
  (server as Server & { shouldUpgradeCallback: (req: IncomingMessage) => boolean }).shouldUpgradeCallback = (req: IncomingMessage) => PATHS.has(pathOf(req.url)) && /^websocket$/i.test(req.headers.upgrade ?? '');

  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    if (isRefused(socket)) return void socket.destroy();
    if (!enabled) return refuse(socket, 405, 'Method Not Allowed', 'invalid_request_error', 'websocket_not_supported', 'Responses over WebSocket is off on this gateway (RESPONSES_WEBSOCKET=off); use POST /v1/ai/responses with stream: true.');
    if (draining || gateway.draining) return refuse(socket, 503, 'Service Unavailable', 'api_error', 'draining', 'The gateway is stopping; connect again.');
    void upgrade(req, socket, head).catch((e) => {
      const status = (e as { status?: number }).status ?? 500;
      if (status === 401) return refuse(socket, 401, 'Unauthorized', 'authentication_error', (e as { code?: string }).code ?? 'invalid_token', (e as Error).message);
      if (status === 403) return refuse(socket, 403, 'Forbidden', 'permission_error', 'identity_not_allowed', (e as Error).message);
      refuse(socket, 503, 'Service Unavailable', 'api_error', 'unavailable', 'The WebSocket could not be opened; use POST /v1/ai/responses.');
    });
  });

  async function upgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.test(k)) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
    // turns are posted inside the gateway: a fixed origin (the Host header travels among the headers)
    const base = 'http://127.0.0.1';
    // auth at the upgrade: a user (token or key) or the admin, as POST /v1/ai/responses allows
    const id = await authenticate(new Request(`${base}/v1/ai/responses`, { headers }), gateway.context);
    if (id.kind !== 'user' && id.kind !== 'admin') {
      const e = new Error(id.kind === 'guest' ? 'Responses over WebSocket needs a bearer token.' : `A ${id.kind} credential cannot call this action.`) as Error & { status: number; code: string };
      e.status = id.kind === 'guest' ? 401 : 403;
      e.code = id.kind === 'guest' ? 'missing_credential' : 'identity_not_allowed';
      throw e;
    }
    if (socket.destroyed) return;
    wss.handleUpgrade(req, socket, head, (ws) => attach(ws, req, headers, `${base}/v1/ai/responses`));
  }

  function attach(ws: WebSocket, req: IncomingMessage, headers: Headers, url: string): void {
    const bindings = { incoming: req }; // the client's address, for rate limits and key IP rules (gateway socketIp)
    const turns = new ResponsesTurns({
      fetch: (r) => gateway.fetch(r, bindings),
      url,
      headers,
      send: (text) => {
        if (ws.readyState === ws.OPEN) ws.send(text);
      },
    });
    open.set(ws, turns);
    const log = gateway.context.log;
    let count = 0;
    log('info', 'ai: responses websocket opened', { path: pathOf(req.url) });
    let idle: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(idle);
      if (idleMs > 0) idle = setTimeout(() => ws.close(1000, 'idle timeout'), idleMs).unref();
    };
    turns.onIdle = () => {
      if (draining) ws.close(1001, 'server shutting down');
      else arm();
    };
    ws.on('message', (data, isBinary) => {
      clearTimeout(idle);
      if (draining) return ws.send(JSON.stringify({ type: 'error', status: 503, error: { type: 'api_error', code: 'draining', message: 'The gateway is stopping; this turn was not run. Connect again.' } }));
      if (isBinary) return ws.send(JSON.stringify({ type: 'error', status: 400, error: { type: 'invalid_request_error', code: 'invalid_event', message: 'Send events as text messages.' } }));
      count++;
      turns.message(String(data));
      if (!turns.busy) arm();
    });
    ws.on('close', (code) => {
      log('info', 'ai: responses websocket closed', { code, messages: count });
      clearTimeout(idle);
      turns.close();
      open.delete(ws);
    });
    ws.on('error', () => {});
    arm();
  }

  return {
    get size() {
      return open.size;
    },
    drain() {
      draining = true;
      for (const [ws, turns] of open) if (!turns.busy) ws.close(1001, 'server shutting down');
    },
    terminate() {
      for (const ws of open.keys()) ws.terminate();
    },
  };
}
