// The "deployed" Worker of the fake wrangler: serves a bundle in workerd through Miniflare
// with the bindings and vars of the wrangler config it was deployed with (D1 by database id,
// queue producers and consumers, R2 buckets, vars), persisted under the fake account's
// directory so a redeploy keeps the data. A control server on another port runs SQL on the
// Worker's D1 databases for `wrangler d1 execute --remote`. Exits when its owner (the test
// process) is gone, or on SIGTERM.
//
//   node fake-wrangler-serve.ts <spec.json>
//   spec: { bundle, config, persistDir, port, ownerPid, infoPath }
import { createServer } from 'node:http';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';

interface WranglerConfig {
  name: string;
  compatibility_date: string;
  compatibility_flags?: string[];
  d1_databases?: { binding: string; database_name: string; database_id: string }[];
  queues?: {
    producers?: { binding: string; queue: string }[];
    consumers?: { queue: string; max_batch_size?: number; max_batch_timeout?: number; max_retries?: number }[];
  };
  r2_buckets?: { binding: string; bucket_name: string }[];
  vars?: Record<string, string>;
}

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8')) as {
  bundle: string;
  config: WranglerConfig;
  persistDir: string;
  port: number;
  ownerPid: number;
  infoPath: string;
};
const c = spec.config;
const d1 = Object.fromEntries((c.d1_databases ?? []).map((d) => [d.binding, d.database_id]));
const native = convertV4MiniflareOptions({
  host: '127.0.0.1',
  port: spec.port,
  workers: [
    {
      name: c.name,
      modules: true,
      modulesRoot: dirname(spec.bundle),
      scriptPath: spec.bundle,
      compatibilityDate: c.compatibility_date,
      compatibilityFlags: c.compatibility_flags ?? [],
      d1Databases: d1,
      queueProducers: Object.fromEntries((c.queues?.producers ?? []).map((p) => [p.binding, { queueName: p.queue }])),
      queueConsumers: Object.fromEntries(
        (c.queues?.consumers ?? []).map((q) => [q.queue, { maxBatchSize: q.max_batch_size, maxBatchTimeout: q.max_batch_timeout, maxRetries: q.max_retries, retryDelay: 0 }]),
      ),
      r2Buckets: Object.fromEntries((c.r2_buckets ?? []).map((b) => [b.binding, b.bucket_name])),
      bindings: c.vars ?? {},
    },
  ],
} as any);
const mf = new Miniflare({ ...native, resourcePersistencePath: spec.persistDir, logRequests: false } as any);
const url = (await mf.ready).origin;

/** POST /d1/<database_id> with the SQL as body → D1's `all()` answer. */
const control = createServer(async (req, res) => {
  try {
    const id = decodeURIComponent((req.url ?? '').replace(/^\/d1\//, ''));
    const binding = Object.keys(d1).find((b) => d1[b] === id);
    if (!binding) {
      res.writeHead(404).end(JSON.stringify({ error: `this Worker binds no D1 database ${id}` }));
      return;
    }
    let sql = '';
    for await (const chunk of req) sql += chunk;
    const db = await mf.getD1Database(binding);
    const r = await db.prepare(sql).all();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: r.results, meta: r.meta }));
  } catch (e) {
    res.writeHead(500).end(JSON.stringify({ error: String(e) }));
  }
});
await new Promise<void>((r) => control.listen(0, '127.0.0.1', r));
const controlUrl = `http://127.0.0.1:${(control.address() as { port: number }).port}`;

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  control.close();
  await mf.dispose();
  process.exit(0);
}
process.on('SIGTERM', stop);
setInterval(() => {
  try {
    process.kill(spec.ownerPid, 0);
  } catch {
    void stop();
  }
}, 500);
// written whole, then renamed into place: the fake wrangler reads it as soon as it exists
writeFileSync(`${spec.infoPath}.tmp`, JSON.stringify({ url, controlUrl, pid: process.pid }));
renameSync(`${spec.infoPath}.tmp`, spec.infoPath);
