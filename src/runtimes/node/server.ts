// The Node runtime: embedded SQLite, an HTTP server, graceful stop on SIGTERM/SIGINT.
import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { openNodeSqlite } from '../../db/dialects/node-sqlite.ts';
import { createGateway, type Gateway } from '../../kernel/gateway.ts';
import { jsonLogger, type Logger } from '../../kernel/log.ts';
import { selectServices } from '../../services/index.ts';
import { readNodeConfig, type NodeConfig } from './config.ts';

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
  const db = openNodeSqlite(config.databasePath);
  const gateway = createGateway({
    db,
    services: selectServices(config.services),
    processEnv: env,
    logger: opts.logger ?? jsonLogger(),
    config: { localLogin: config.localLogin },
  });
  const { generatedAdminKey } = await gateway.init();
  if (generatedAdminKey) {
    process.stderr.write(
      `\ncitygate: generated the admin key (shown once):\n\n  ${generatedAdminKey}\n\n` +
        `Read it again with: citygate admin-key   (reads DATABASE_PATH=${config.databasePath})\n\n`,
    );
  }

  const server = serve({ fetch: gateway.fetch, hostname: config.host, port: config.port });
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
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
      });
      await gateway.stop();
      await db.close();
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
