import { startNodeServer } from '../runtimes/node/server.ts';

export async function serveCommand(): Promise<number> {
  const s = await startNodeServer(process.env, { installSignals: true });
  process.stderr.write(`citygate listening on ${s.url} (database ${s.config.databasePath})\n`);
  return 0;
}
