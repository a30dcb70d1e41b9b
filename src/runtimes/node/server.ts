// The Node runtime: embedded SQLite (or PostgreSQL), an HTTP server, and the drain on
// SIGTERM/SIGINT that a rolling deploy needs:
//   1. readiness goes false (/health/ready 503) and the listener stops accepting;
//   2. every response from then on carries `Connection: close`, idle keep-alive sockets are
//      closed (a load balancer keeps sending on open connections after it sent SIGTERM);
//   3. calls and streams in flight finish, up to SHUTDOWN_TIMEOUT_MS (default 30 s); then the
//      streams still open are ended with their API's error event and charged by the estimate;
//   4. then, always: usage records, charges and lease returns are written (gateway.stop()),
//      the database is closed, and the process exits 0. Only SIGKILL skips step 4.
import { serve } from '@hono/node-server';
import { readFile } from 'node:fs/promises';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGateway, type Gateway } from '../../kernel/gateway.ts';
import { jsonLogger, type Logger } from '../../kernel/log.ts';
import { AI_CONFIG } from '../../services/ai/state.ts';
import { selectServices } from '../../services/index.ts';
import { describeDatabase, isLoopbackHost, localLoginWarning, readNodeConfig, type NodeConfig } from './config.ts';
import { openNodeDatabase, whileUnavailable } from './database.ts';
import { LocalFileStore } from './file-store.ts';
import { NodeJobRunner } from './job-runner.ts';
import { loadProjectConfig } from './project-config.ts';
import { isStreamed, writeStreamed } from './event-stream.ts';
import { installStreamedResponses } from './streamed-response.ts';
import { writeWhole } from './whole-answer.ts';
import { readIncomingBody } from './request-body.ts';
import { wholeBodyOf } from '../../kernel/http.ts';
import { bufferedLines } from './log-writer.ts';
import { undiciHttp } from './upstream-http.ts';
import { limitedCreateServer, readConnectionLimits } from './connection-limits.ts';
import { installNodeMetrics } from './metrics.ts';
import { nodeMasterKey } from './master-key.ts';
import { nodeConsoleAssets } from './console-assets.ts';
import { installResponsesSockets } from './websocket.ts';

/** What @hono/node-server hands the gateway with each request, plus the headers the gateway adds. */
interface Bindings {
  outgoing: ServerResponse;
  added?: Record<string, string>;
}

// Scalar's self-contained browser build, next to the package's entry point.
const scalarScript = async () => {
  const entry = fileURLToPath(import.meta.resolve('@scalar/api-reference'));
  return readFile(join(dirname(entry), 'browser/standalone.js'));
};

export interface RunningServer {
  url: string;
  gateway: Gateway;
  config: NodeConfig;
  /** The drain (see the top of this file); resolves once everything is written and closed. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export async function startNodeServer(
  env: NodeJS.ProcessEnv = process.env,
  opts: { logger?: Logger; installSignals?: boolean } = {},
): Promise<RunningServer> {
  const config = readNodeConfig(env);
  const masterKey = nodeMasterKey(env, config.databasePath); // refuses before waiting for a database
  const connectionLimits = readConnectionLimits(env); // a bad value fails the boot here, before anything opens
  installNodeMetrics();
  const db = await openNodeDatabase(config);
  // One stdout write per event-loop turn for all its log lines (the request line of every call).
  const lines = opts.logger ? null : bufferedLines();
  const logger = opts.logger ?? jsonLogger(lines!.write);
  const project = await loadProjectConfig();
  const http = undiciHttp();
  const jobs = new NodeJobRunner(db, logger, { leaseMs: config.jobLeaseMs });
  const gateway = createGateway({
    db,
    services: selectServices(config.services),
    processEnv: env,
    logger,
    config: { localLogin: config.localLogin, publicUrlFallback: isLoopbackHost(config.host) ? 'loopback-request' : 'none' },
    docsScript: scalarScript,
    consoleAssets: nodeConsoleAssets(),
    http,
    jobs,
    storage: new LocalFileStore(join(config.dataDir, 'files')),
    masterKey,
    readBody: readIncomingBody,
    socketIp: (_req, b) => (b as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket?.remoteAddress,
    addHeaders(b, headers) {
      const bindings = b as Bindings | undefined;
      if (!bindings?.outgoing || bindings.outgoing.headersSent) return false;
      // kept until the response is written (fetchNode): merged into its head
      if (bindings.added) Object.assign(bindings.added, headers);
      else bindings.added = headers;
      return true;
    },
  });
  if (project.config.ai) gateway.context.provide(AI_CONFIG, project.config.ai);
  let generatedAdminKey: string | null;
  try {
    // init is idempotent: a database that goes away during it (or a SQLite file another
    // booting process holds) is waited for as at connect, not the end of the boot
    ({ generatedAdminKey } = await whileUnavailable(() => gateway.init(), config, (l) => process.stderr.write(`${l}\n`)));
  } catch (e) {
    await db.close().catch(() => {});
    throw e;
  }
  jobs.start(gateway);
  const loginWarning = localLoginWarning(config);
  if (loginWarning) gateway.context.log('warn', loginWarning);
  if (generatedAdminKey) {
    process.stderr.write(
      `\ncitygate: generated the admin key (shown once):\n\n  ${generatedAdminKey}\n\n` +
        `Read it again with: citygate admin-key   (reads ${config.databaseUrl ? 'DATABASE_URL' : 'DATABASE_PATH'}=${describeDatabase(config)})\n\n`,
    );
  }

  // Streamed responses are written by the runtime (headers with the first chunk), and so are whole
  // answers of bytes (one writeHead, Node's fast path), with the headers the gateway added merged
  // into their head; the rest by the adapter, with those headers set on the ServerResponse first.
  // A browser's request (Origin) skips the whole-answer path: CORS adds headers to the Response
  // after it was made, which only the adapter's path reads.
  let draining = false;
  const fetchNode = async (req: Request, bindings: Bindings): Promise<Response> => {
    const res = await gateway.fetch(req, bindings);
    const out = bindings.outgoing;
    // Draining: this answer is the connection's last (Node writes `Connection: close` and ends it).
    if (draining) out.shouldKeepAlive = false;
    if (isStreamed(res)) return writeStreamed(res, out, bindings.added);
    const whole = wholeBodyOf(res);
    if (whole && !out.headersSent && !req.headers.get('origin')) return writeWhole(res, whole, out, bindings.added);
    const added = bindings.added;
    if (added && !out.headersSent) for (const k in added) out.setHeader(k, added[k]);
    return res;
  };
  const server = serve({
    fetch: fetchNode as (req: Request, env: unknown) => Promise<Response>,
    hostname: config.host,
    port: config.port,
    createServer: limitedCreateServer(connectionLimits) as never, // slow clients are cut (connection-limits.ts)
  }) as Server;
  installStreamedResponses(); // after serve(): they extend the adapter's Response
  const sockets = installResponsesSockets(server, gateway, env); // Responses over WebSocket, same port
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}`;

  let stopping: Promise<void> | null = null;
  const log = gateway.context.log;
  const stop = () =>
    (stopping ??= (async () => {
      gateway.drain(); // readiness false
      draining = true;
      sockets.drain(); // WebSockets close once their turn is done (the listener's close waits for them)
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Sockets that go idle later (their answer was under way) are closed as they do.
      const idle = setInterval(() => server.closeIdleConnections(), 100);
      server.closeIdleConnections();
      const finished = await Promise.race([closed.then(() => true), sleep(config.shutdownTimeoutMs).then(() => false)]);
      if (!finished) {
        // Streams still open end with their API's error event, charged by the estimate rules;
        // a moment for them to write it, then whatever is left is cut.
        const streams = gateway.endStreams();
        log('warn', 'drain deadline passed (SHUTDOWN_TIMEOUT_MS): ending what is still open', { streams, websockets: sockets.size });
        await Promise.race([closed, sleep(2000)]);
        sockets.terminate();
        server.closeAllConnections();
        await Promise.race([closed, sleep(1000)]);
      }
      clearInterval(idle);
      // Running background jobs are handed back to the queue for the next boot.
      await jobs.stop();
      await gateway.stop(); // usage records, charges, lease returns: always
      await http.close().catch(() => {});
      await db.close();
      lines?.flush();
    })());

  if (opts.installSignals) {
    const onSignal = (sig: string) => {
      // A second signal (Ctrl-C reaches a cluster's workers and their primary, which forwards
      // SIGTERM) changes nothing: the drain is under way, and only SIGKILL may cut it short.
      if (stopping) return;
      log('info', 'stopping', { signal: sig, shutdown_timeout_ms: config.shutdownTimeoutMs });
      // A backstop for a stop that hangs (e.g. on a database that never answers).
      setTimeout(() => {
        log('error', 'the stop did not finish in time; exiting', {});
        lines?.flush();
        process.exit(1);
      }, config.shutdownTimeoutMs + 30_000).unref();
      stop().then(
        () => process.exit(0),
        (e) => {
          log('error', 'stop failed', { error: String(e) });
          lines?.flush();
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
  }
  return { url, gateway, config, stop };
}
