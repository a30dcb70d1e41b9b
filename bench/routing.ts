// Microbenchmark of routing alone: CPU time of route() for a model with one upstream vs three
// (no failures; the attempt answers at once), in one process, without HTTP. It isolates what
// routing adds to a call from the noise of a loaded machine (`npm run bench` measures the
// whole server). Run: node bench/routing.ts
import { openNodeSqlite } from '../src/db/dialects/node-sqlite.ts';
import { createGateway } from '../src/kernel/gateway.ts';
import { route } from '../src/services/ai/routing/route.ts';
import { upstreamTableOf } from '../src/services/ai/routing/upstreams.ts';
import { findModel } from '../src/services/ai/catalog/resolve.ts';
import { selectServices } from '../src/services/index.ts';
import { installNodeMetrics } from '../src/runtimes/node/metrics.ts';

installNodeMetrics(); // as the Node server does: prom-client counters and histograms included

const gateway = createGateway({ db: openNodeSqlite(':memory:'), services: selectServices('env,cities,ai'), processEnv: {}, logger: () => {} });
await gateway.init();
const gw = gateway.context;
const table = upstreamTableOf(gw);
for (let i = 0; i < 3; i++) {
  await table.create({ name: `u${i}`, kind: 'openai-compatible', base_url: 'http://127.0.0.1:9/v1', api_key: 'sk-x', models: i === 0 ? ['one', 'three'] : ['three'], weight: 1, priority: 0, enabled: true });
}
const signal = new AbortController().signal;
const attempt = async (_t: unknown, d: { clear(): void }) => (d.clear(), 1);

async function measure(id: string, n: number): Promise<number> {
  const model = findModel(gw, id)!;
  for (let i = 0; i < 5_000; i++) await route(gw, { model, operation: 'chat', signal }, attempt); // warm-up
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await route(gw, { model, operation: 'chat', signal }, attempt);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

const N = 50_000;
for (let round = 0; round < 3; round++) {
  const one = await measure('one', N);
  const three = await measure('three', N);
  console.log(`round ${round + 1}: route() CPU per call — 1 upstream ${one.toFixed(2)} µs, 3 upstreams ${three.toFixed(2)} µs`);
}
await gateway.stop?.();
