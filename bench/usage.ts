// Usage at scale (not run by CI): writes USAGE_BENCH_ROWS records (default 1,000,000) through
// the real metering sink (batched writes with the daily rollup), then times the reports the
// admin calls: summary, and filtered list pages, through the gateway's fetch handler.
//
//   node bench/usage.ts                 # 1M rows in a temporary database
//   USAGE_BENCH_ROWS=200000 node bench/usage.ts
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openNodeSqlite } from '../src/db/dialects/node-sqlite.ts';
import { createGateway } from '../src/kernel/gateway.ts';
import { silentLogger } from '../src/kernel/log.ts';
import { METERING, type MeterRecord } from '../src/kernel/metering.ts';
import { stockServices } from '../src/services/index.ts';
import type { UsageBuffer } from '../src/services/usage/index.ts';

const ROWS = Number(process.env.USAGE_BENCH_ROWS ?? 1_000_000);
const dir = mkdtempSync(join(tmpdir(), 'citygate-usage-bench-'));
const db = openNodeSqlite(join(dir, 'bench.sqlite'));
const gw = createGateway({ db, services: stockServices, logger: silentLogger, processEnv: { USAGE_FLUSH_MS: '60000', USAGE_BATCH_SIZE: '1000' } });
await gw.init();
const sink = gw.context.use<UsageBuffer>(METERING)!;
const admin = gw.context.env.get('GATEWAY_ADMIN_SECRET_KEY')!;

const DAY = 86_400_000;
const start = Date.now() - 90 * DAY;
const models = Array.from({ length: 10 }, (_, i) => `model-${i}`);
let t = performance.now();
for (let i = 0; i < ROWS; i++) {
  const r: MeterRecord = {
    request_id: `req_${i}`,
    city_id: `city-${i % 20}`,
    user_id: `user-${i % 1000}`,
    identity: 'user',
    model: models[i % 10],
    mode: 'compat',
    status: i % 50 === 0 ? 'error' : 'ok',
    input_tokens: 100 + (i % 300),
    output_tokens: 50 + (i % 200),
    cached_tokens: 0,
    images: 0,
    seconds: 0,
    credits: 1000 + (i % 700),
    duration_ms: 300 + (i % 900),
    created_at: start + Math.floor((i / ROWS) * 90 * DAY),
  };
  sink.record(r);
  if (sink.pending >= 50_000) await sink.flush();
}
await sink.flush();
const writeS = (performance.now() - t) / 1000;
console.log(`wrote ${ROWS.toLocaleString('en-US')} usage records through the sink in ${writeS.toFixed(1)} s (${Math.round(ROWS / writeS).toLocaleString('en-US')}/s)`);

async function timed(label: string, path: string, runs = 5) {
  const times: number[] = [];
  let body: any;
  for (let i = 0; i < runs; i++) {
    t = performance.now();
    const res = await gw.fetch(new Request(`http://bench${path}`, { headers: { authorization: `Bearer ${admin}` } }));
    body = await res.json();
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  console.log(`${label.padEnd(58)} median ${times[Math.floor(runs / 2)].toFixed(1)} ms  (items: ${body.items.length})`);
  return body;
}

const to = new Date().toISOString().slice(0, 10);
const from = new Date(start).toISOString().slice(0, 10);
const s = await timed('GET usage/summary, 90 days, all cities and models', `/v1/usage/summary?from=${from}&to=${to}`);
console.log(`  summary total calls: ${s.totals.calls.toLocaleString('en-US')} (records: ${ROWS.toLocaleString('en-US')})`);
await timed('GET usage/summary, 90 days, one city', `/v1/usage/summary?from=${from}&to=${to}&city_id=city-3`);
await timed('GET usage/list, newest 50', '/v1/usage/list');
await timed('GET usage/list, city + user', '/v1/usage/list?city_id=city-3&user_id=user-3');
await timed('GET usage/list, model + status=error', '/v1/usage/list?model=model-0&status=error');
await timed('GET usage/list, city, 1-day window in the middle', `/v1/usage/list?city_id=city-7&from=${start + 45 * DAY}&to=${start + 46 * DAY}`);
const deep = await timed('GET usage/list, city, page 1', '/v1/usage/list?city_id=city-7&limit=200', 1);
await timed('GET usage/list, city, page 2 (cursor)', `/v1/usage/list?city_id=city-7&limit=200&cursor=${deep.next_cursor}`);

// For comparison: the same summary computed from the raw records instead of the rollup.
t = performance.now();
const raw = await db.kysely
  .selectFrom('usage')
  .select((eb) => [eb.fn.count('seq').as('n')])
  .where('created_at', '>=', start)
  .executeTakeFirst();
console.log(`raw COUNT(*) over the records (no rollup), for comparison    ${(performance.now() - t).toFixed(1)} ms  (${raw?.n})`);

await gw.stop();
await db.close();
rmSync(dir, { recursive: true, force: true });
