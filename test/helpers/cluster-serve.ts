// A node:cluster deployment for tests until `GATEWAY_WORKERS` lands: the primary forks
// TEST_WORKERS workers that each run the Node server on one shared port, and answers their
// /metrics requests with every worker's registry summed (serveClusterMetrics).
import cluster from 'node:cluster';
import { serveClusterMetrics } from '../../src/runtimes/node/metrics.ts';
import { startNodeServer } from '../../src/runtimes/node/server.ts';

if (cluster.isPrimary) {
  serveClusterMetrics();
  const n = Number(process.env.TEST_WORKERS ?? 2);
  for (let i = 0; i < n; i++) cluster.fork();
  const stop = () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    setTimeout(() => process.exit(0), 3000).unref();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  cluster.on('exit', () => {
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
  });
} else {
  const s = await startNodeServer(process.env, { installSignals: true });
  process.stderr.write(`worker ${process.pid} listening on ${s.url}\n`);
}
