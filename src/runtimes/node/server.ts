// The Node runtime: embedded SQLite, an HTTP server, graceful stop on SIGTERM/SIGINT.
import { serve } from '@hono/node-server';
import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGateway, type Gateway } from '../../kernel/gateway.ts';
import { jsonLogger, type Logger } from '../../kernel/log.ts';
import { AI_CONFIG } from '../../services/ai/state.ts';
import { selectServices } from '../../services/index.ts';
import { describeDatabase, readNodeConfig, type NodeConfig } from './config.ts';
import { openNodeDatabase } from './database.ts';
import { LocalFileStore } from './file-store.ts';
import { NodeJobRunner } from './job-runner.ts';
import { loadProjectConfig } from './project-config.ts';
import { isEventStream, writeEventStream } from './event-stream.ts';
import { writeWhole } from './whole-answer.ts';
import { wholeBodyOf } from '../../kernel/http.ts';
import { bufferedLines } from './log-writer.ts';
import { undiciHttp } from './upstream-http.ts';
import { installNodeMetrics } from './metrics.ts';
import { nodeMasterKey } from './master-key.ts';
import { nodeConsoleAssets } from './console-assets.ts';

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
  stop(): Promise<void>;
}

export async function startNodeServer(
  env: NodeJS.ProcessEnv = process.env,
  opts: { logger?: Logger; installSignals?: boolean } = {},
): Promise<RunningServer> {
  const config = readNodeConfig(env);
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
    config: { localLogin: config.localLogin },
    docsScript: scalarScript,
    consoleAssets: nodeConsoleAssets(),
    http,
    jobs,
    storage: new LocalFileStore(join(config.dataDir, 'files')),
    masterKey: nodeMasterKey(env, config.databasePath),
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
    ({ generatedAdminKey } = await gateway.init());
  } catch (e) {
    await db.close().catch(() => {});
    throw e;
  }
  jobs.start(gateway);
  if (generatedAdminKey) {
    process.stderr.write(
      `\ncitygate: generated the admin key (shown once):\n\n  ${generatedAdminKey}\n\n` +
        `Read it again with: citygate admin-key   (reads ${config.databaseUrl ? 'DATABASE_URL' : 'DATABASE_PATH'}=${describeDatabase(config)})\n\n`,
    );
  }

  // Event streams are written by the runtime (headers with the first chunk), and so are whole
  // answers of bytes (one writeHead, Node's fast path), with the headers the gateway added merged
  // into their head; the rest by the adapter, with those headers set on the ServerResponse first.
  // A browser's request (Origin) skips the whole-answer path: CORS adds headers to the Response
  // after it was made, which only the adapter's path reads.
  const fetchNode = async (req: Request, bindings: Bindings): Promise<Response> => {
    const res = await gateway.fetch(req, bindings);
    const out = bindings.outgoing;
    if (isEventStream(res)) return writeEventStream(res, out, bindings.added);
    const whole = wholeBodyOf(res);
    if (whole && !out.headersSent && !req.headers.get('origin')) return writeWhole(res, whole, out, bindings.added);
    const added = bindings.added;
    if (added && !out.headersSent) for (const k in added) out.setHeader(k, added[k]);
    return res;
  };
  const server = serve({ fetch: fetchNode as (req: Request, env: unknown) => Promise<Response>, hostname: config.host, port: config.port });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}`;

  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      // Stop accepting, let in-flight requests finish, flush, then close the database.
      // Running background jobs are handed back to the queue for the next boot.
      await jobs.stop();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
      });
      await gateway.stop();
      await http.close().catch(() => {});
      await db.close();
      lines?.flush();
    })());

  if (opts.installSignals) {
    const onSignal = (sig: string) => {
      gateway.context.log('info', 'stopping', { signal: sig });
      const force = setTimeout(() => process.exit(1), 15_000);
      force.unref();
      stop().then(() => process.exit(0), () => process.exit(1));
    };
    process.once('SIGTERM', () => onSignal('SIGTERM'));
    process.once('SIGINT', () => onSignal('SIGINT'));
  }
  return { url, gateway, config, stop };
}
