import { describeDatabase } from '../runtimes/node/config.ts';
import { startNodeServer } from '../runtimes/node/server.ts';

export async function serveCommand(): Promise<number> {
  const s = await startNodeServer(process.env, { installSignals: true });
  process.stderr.write(`citygate listening on ${s.url} (database ${describeDatabase(s.config)})\n`);
  return 0;
}
