import cluster from 'node:cluster';
import { flushCompileCache } from 'node:module';
import { announceWorker, startPrimary, stopWithPrimary } from '../runtimes/node/cluster.ts';
import { describeDatabase, readNodeConfig } from '../runtimes/node/config.ts';
import { startNodeServer } from '../runtimes/node/server.ts';

export async function serveCommand(): Promise<number> {
  const config = readNodeConfig(process.env);
  if (config.workers > 1 && cluster.isPrimary) {
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
