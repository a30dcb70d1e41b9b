// tools/call through citygate's /v1/mcp against a direct call to the same upstream: p50/p99
// latency, req/s, and citygate's overhead (through − direct) at p50 and p99. One upstream MCP
// server built with the official SDK (test/stubs/mcp-upstream.ts, an echo tool) on loopback, in a
// process of its own (bench/mcp-upstream.ts); a
// real citygate (`citygate serve`, SQLite, billing on: the tool is priced and the user funded,
// so every call holds and settles credits); CONNECTIONS SDK clients in parallel, each calling
// in a loop for DURATION seconds, first straight at the upstream, then through citygate
// (alternating rounds, ROUNDS times, to spread the machine's drift). After the run the user's
// balance drop must equal Σ usage credits.
// Run: BENCH_DURATION=10 BENCH_CONNECTIONS=16 BENCH_ROUNDS=2 node bench/mcp.ts
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startGateway } from '../test/helpers/gateway.ts';
import { client } from '../test/helpers/http.ts';
import { spawn } from 'node:child_process';
import { once } from 'node:events';

const DURATION = Number(process.env.BENCH_DURATION ?? 10) * 1000;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const PRICE = 10;

const stub = spawn(process.execPath, [new URL('./mcp-upstream.ts', import.meta.url).pathname], { stdio: ['ignore', 'pipe', 'inherit'] });
const [line] = (await once(stub.stdout!, 'data')) as [Buffer];
const up = { url: line.toString().trim(), close: async () => void stub.kill('SIGTERM') };
const gw = await startGateway({ env: { AI_FETCH_ALLOW_PRIVATE: 'true', RATE_LIMIT_USER_AI_CALLS: '0' } });
const admin = client(gw.url, gw.adminKey);
await admin.post('/v1/cities/create', { city_id: 'bench', name: 'bench' });
const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'bench', user_id: 'bench' })).body.user_token as string;
await admin.post('/v1/balance/adjust', { city_id: 'bench', user_id: 'bench', credits: 1_000_000_000, reason: 'bench', idempotency_key: 'bench' });
const s = await admin.post('/v1/mcp/servers/create', { city_id: 'bench', name: 'b', url: up.url, price: PRICE });
if (s.status !== 200) throw new Error(s.text);

async function clients(url: string, headers: Record<string, string>): Promise<Client[]> {
  return Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const c = new Client({ name: 'bench', version: '1' });
      await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
      return c;
    }),
  );
}

async function load(cs: Client[], tool: string): Promise<{ n: number; errors: number; lat: number[]; seconds: number }> {
  const lat: number[] = [];
  let errors = 0;
  const end = performance.now() + DURATION;
  const t0 = performance.now();
  await Promise.all(
    cs.map(async (c) => {
      while (performance.now() < end) {
        const a = performance.now();
        try {
          await c.callTool({ name: tool, arguments: { text: 'x' } });
          lat.push(performance.now() - a);
        } catch {
          errors++;
        }
      }
    }),
  );
  return { n: lat.length, errors, lat: lat.sort((x, y) => x - y), seconds: (performance.now() - t0) / 1000 };
}

const pct = (a: number[], p: number) => a[Math.min(a.length - 1, Math.floor((a.length * p) / 100))] ?? NaN;
const direct = await clients(up.url, {});
const through = await clients(`${gw.url}/v1/mcp`, { authorization: `Bearer ${token}` });
const before = (await client(gw.url, token).get('/v1/balance/me')).body.credits as number;
await load(direct, 'echo'); // warm-up of both paths (connections, JIT, caches)
await load(through, 'b__echo');
const rows: string[][] = [];
let charged = 0;
for (let r = 0; r < ROUNDS; r++) {
  const d = await load(direct, 'echo');
  const t = await load(through, 'b__echo');
  charged += t.n;
  rows.push([
    String(r + 1),
    (d.n / d.seconds).toFixed(0),
    pct(d.lat, 50).toFixed(2),
    pct(d.lat, 99).toFixed(2),
    (t.n / t.seconds).toFixed(0),
    pct(t.lat, 50).toFixed(2),
    pct(t.lat, 99).toFixed(2),
    (pct(t.lat, 50) - pct(d.lat, 50)).toFixed(2),
    (pct(t.lat, 99) - pct(d.lat, 99)).toFixed(2),
    String(d.errors + t.errors),
  ]);
}
console.log(`tools/call, ${CONNECTIONS} clients, ${DURATION / 1000} s per case, billing on (${PRICE} credits per call)\n`);
console.log('| round | direct req/s | p50 ms | p99 ms | citygate req/s | p50 ms | p99 ms | overhead p50 ms | overhead p99 ms | errors |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
await Promise.all([...direct, ...through].map((c) => c.close()));
// the books: every call through citygate (warm-up included) charged once
await new Promise((r) => setTimeout(r, 2000));
const after = (await client(gw.url, token).get('/v1/balance/me')).body.credits as number;
const usage = await admin.get('/v1/usage/summary?city_id=bench');
const usageCredits = Number((usage.body.totals ?? usage.body).credits);
console.log(`\nbooks: balance drop ${before - after} credits, Σ usage credits ${usageCredits} → ${before - after === usageCredits ? 'exact' : 'MISMATCH'} (${charged} measured calls × ${PRICE}, warm-up calls charged too)`);
if (before - after !== usageCredits) process.exitCode = 1;
await gw.stop();
await up.close();
