import cluster from 'node:cluster';
import { flushCompileCache } from 'node:module';
import { announceWorker, startPrimary, stopWithPrimary } from '../runtimes/node/cluster.ts';
import { describeDatabase, readNodeConfig } from '../runtimes/node/config.ts';
import { openNodeDatabase } from '../runtimes/node/database.ts';
import { nodeMasterKey } from '../runtimes/node/master-key.ts';
import { startNodeServer } from '../runtimes/node/server.ts';

export async function serveCommand(): Promise<number> {
  const config = readNodeConfig(process.env);
  if (config.workers > 1 && cluster.isPrimary) {
    // What would stop every worker is checked once, here: the master key, and a database that
    // is not up yet is waited for by the primary (workers started before it would only die).
    nodeMasterKey(process.env, config.databasePath);
    if (config.databaseUrl) await (await openNodeDatabase(config)).close();
    startPrimary(config, { installSignals: true }); // the workers keep this process alive
    return 0;
  }
  const s = await startNodeServer(process.env, { installSignals: true }).catch((e: Error) => {
    if (!cluster.isWorker) throw e;
    // the IPC channel would keep a failed worker alive: exit, and let the primary decide
    process.stderr.write(`citygate worker ${process.pid}: ${e.message}\n`);
    process.exit(1);
  });
  // The compile cache (heap.ts) is otherwise written only at a graceful exit.
  flushCompileCache?.();
  if (cluster.isWorker) {
    announceWorker(s.url);
    stopWithPrimary(s.stop);
  } else {
    process.stderr.write(`citygate listening on ${s.url} (database ${describeDatabase(s.config)})\n`);
  }
  return 0;
}
