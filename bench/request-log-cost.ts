// What request logs cost a call (issue 27, part 4). Not run by CI, not a throughput run: one
// in-process gateway (SQLite, files/ in a temp dir) in front of the OpenAI stub, calls made one
// after another so each call's background work (redact, blob, row) lands between calls and is
// counted in the next one's time. Per mode (off, metadata, full) and per shape (json, stream):
// the mean and p50 wall time of a call and its mean x-citygate-overhead-ms; and the cost of
// the one check an AI call makes when logs are off.
//
//   node bench/request-log-cost.ts            # BENCH_CALLS=2000 per case
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openNodeSqlite } from '../src/db/dialects/node-sqlite.ts';
import { createGateway } from '../src/kernel/gateway.ts';
import { logModeOf } from '../src/kernel/http/capture.ts';
import { silentLogger } from '../src/kernel/log.ts';
import { LocalFileStore } from '../src/runtimes/node/file-store.ts';
import { stockServices } from '../src/services/index.ts';
import { startOpenAIStub } from '../test/stubs/openai.ts';

const N = Number(process.env.BENCH_CALLS ?? 2000);
const stub = await startOpenAIStub();
const dir = mkdtempSync(join(tmpdir(), 'citygate-rlog-bench-'));
const gw = createGateway({
  db: openNodeSqlite(join(dir, 'bench.sqlite')),
  services: stockServices,
  logger: silentLogger,
  storage: new LocalFileStore(join(dir, 'files')),
  processEnv: { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model' },
});
await gw.init();
const admin = gw.context.env.get('GATEWAY_ADMIN_SECRET_KEY')!;
const api = async (path: string, body: unknown, token = admin) => {
  const r = await gw.fetch(new Request(`http://x${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }));
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r;
};
await api('/v1/cities/create', { city_id: 'bench', name: 'bench' });
const token = (await (await api('/v1/cities/tokens/apply', { city_id: 'bench', user_id: 'u' })).json()).user_token as string;

const bodies = {
  json: JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'say something about gateways and logs' }] }),
  stream: JSON.stringify({ model: 'stub-model', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'say something about gateways and logs' }] }),
};

async function run(shape: 'json' | 'stream') {
  const times: number[] = [];
  let overhead = 0;
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    const r = await gw.fetch(new Request('http://x/v1/ai/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: bodies[shape] }));
    await r.arrayBuffer();
    times.push(performance.now() - t);
    overhead += Number(r.headers.get('x-citygate-overhead-ms') ?? 0);
  }
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / N;
  return { mean_us: Math.round(mean * 1000), p50_us: Math.round(times[N >> 1] * 1000), overhead_us: Math.round((overhead / N) * 1000) };
}

const rows: Record<string, unknown>[] = [];
for (const mode of ['off', 'metadata', 'full']) {
  await api('/v1/env/upsert', { key: 'REQUEST_LOG', value: mode });
  for (const shape of ['json', 'stream'] as const) {
    await run(shape); // warm-up
    rows.push({ mode, shape, ...(await run(shape)) });
  }
}
console.table(rows);

// the check itself, off: what every AI call pays
await api('/v1/env/upsert', { key: 'REQUEST_LOG', value: 'off' });
const identity = { kind: 'user' as const, cityId: 'bench', userId: 'u', expiresAt: Date.now() + 3600_000 };
await gw.context.cities.settings('bench');
let off = 0;
const M = 5_000_000;
const t0 = performance.now();
for (let i = 0; i < M; i++) if (logModeOf(gw.context, identity) === null) off++;
console.log(`the off check: ${(((performance.now() - t0) * 1e6) / M).toFixed(1)} ns per call (${off === M ? 'off' : 'ON?'}; ${M} calls)`);
await gw.stop?.();
await stub.close();
process.exit(0);
