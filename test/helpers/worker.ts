// Runs the gateway's Worker in workerd through Miniflare's API, the way Cloudflare runs it:
// bundled by wrangler (the production bundler, without nodejs_compat, so a Node-only API in
// shared code fails here), with a local D1 persisted to a directory, a local queue whose
// consumer is the same Worker, and a local R2 bucket.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { tempDir } from './gateway.ts';

const ROOT = resolve(import.meta.dirname, '../..');
export const WORKER_ENTRY = join(ROOT, 'src/runtimes/workers/index.ts');
export const COMPATIBILITY_DATE = '2025-09-01';
const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');

const bundles = new Map<string, Promise<string>>();

/** The env var naming npm test's bundle of WORKER_ENTRY (test/helpers/global-setup.ts), made once per run. */
export const SHARED_BUNDLE_ENV = 'CITYGATE_TEST_WORKER_BUNDLE';

/**
 * Bundles an entry with `wrangler deploy --dry-run` once per process (WORKER_ENTRY: once per npm
 * test run, in its global setup); resolves with the bundle's path.
 */
export function bundleWorker(entry = WORKER_ENTRY): Promise<string> {
  const shared = entry === WORKER_ENTRY ? process.env[SHARED_BUNDLE_ENV] : undefined;
  if (shared) return Promise.resolve(shared);
  let hit = bundles.get(entry);
  if (!hit) {
    const dir = mkdtempSync(join(tmpdir(), 'citygate-bundle-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    bundles.set(entry, (hit = bundleInto(entry, dir)));
  }
  return hit;
}

/** Bundles `entry` into `dir` (the caller removes it); resolves with the bundle's path. */
export async function bundleInto(entry: string, dir: string): Promise<string> {
  const config = join(dir, 'wrangler.json');
  writeFileSync(
    config,
    JSON.stringify({
      name: 'citygate-test',
      main: entry,
      compatibility_date: COMPATIBILITY_DATE,
      d1_databases: [{ binding: 'DB', database_name: 'citygate-test-db', database_id: '00000000-0000-0000-0000-000000000000' }],
    }),
  );
  return (await wranglerBundle(config, join(dir, 'out'))).bundle;
}

/**
 * `wrangler deploy --dry-run --config <config> --outdir <outdir>` with the real wrangler:
 * checks the config, bundles its `main`, and refuses a bundle that imports Node built-ins.
 */
export async function wranglerBundle(config: string, outdir: string): Promise<{ bundle: string; output: string }> {
  const child = spawn(WRANGLER, ['deploy', '--dry-run', '--outdir', outdir, '--config', config], {
    cwd: dirname(config),
    env: {
      ...process.env,
      PATH: [dirname(process.execPath), process.env.PATH].join(delimiter),
      WRANGLER_SEND_METRICS: 'false',
      CI: 'true',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const status = await new Promise<number | null>((r, reject) => child.once('error', reject).once('close', r));
  const output = `${stdout}\n${stderr}`;
  if (status !== 0) throw new Error(`wrangler could not bundle with ${config}:\n${output}`);
  const js = readdirSync(outdir).filter((f) => f.endsWith('.js'));
  if (js.length !== 1) throw new Error(`expected one bundle in ${outdir}, found: ${js.join(', ')}`);
  const bundle = join(outdir, js[0]);
  // Without nodejs_compat, wrangler leaves `node:*` imports external and the Worker would
  // fail to load on Cloudflare: shared code must not use Node-only APIs.
  const nodeImports = nodeBuiltinImports(readFileSync(bundle, 'utf8'));
  if (nodeImports.length) throw new Error(`the Worker bundle of ${config} imports Node-only modules: ${nodeImports.join(', ')}`);
  return { bundle, output };
}

/** `node:*` (and bare Node built-in) modules a bundle still imports. */
export function nodeBuiltinImports(code: string): string[] {
  const found = new Set<string>();
  const re = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|^\s*import\s*)["']((?:node:)?(?:fs|path|os|crypto|child_process|net|http|https|sqlite|stream|url|util|worker_threads|zlib|events|buffer|async_hooks|module|process|tls|dns)(?:\/[a-z]+)?|node:[a-z_/]+)["']/gm;
  for (const m of code.matchAll(re)) found.add(m[1]);
  return [...found];
}

export interface WorkerStartOptions {
  bundle?: string;
  persistDir?: string;
  vars?: Record<string, string>;
  /** Declares R2 storage (binding MEDIA). */
  storage?: boolean | { publicUrlPrefix?: string };
  /** A static-assets directory served before the Worker, as `citygate deploy` uploads the console's. */
  assets?: string;
  /** A second Worker (its own isolate) on the same D1, reached at http://second.local/ via dispatch. */
  secondIsolate?: boolean;
}

export interface TestWorker {
  url: string;
  persistDir: string;
  mf: Miniflare;
  logs(): string;
  /** A request to the second isolate (secondIsolate: true). */
  second(path: string, init?: RequestInit): Promise<Response>;
  /** A SQL query on the local D1, as an operator would run `wrangler d1 execute`. */
  sql<T = Record<string, unknown>>(query: string, ...params: unknown[]): Promise<T[]>;
  adminKey(): Promise<string>;
  stop(): Promise<void>;
  /** Stops and starts the Worker again on the same persisted state. */
  restart(): Promise<TestWorker>;
}

export const QUEUE_NAME = 'citygate-test-queue';

export async function startWorker(opts: WorkerStartOptions = {}): Promise<TestWorker> {
  const bundle = opts.bundle ?? (await bundleWorker());
  const persistDir = opts.persistDir ?? tempDir('citygate-edge-');
  let logs = '';
  const storage = opts.storage ? (opts.storage === true ? {} : opts.storage) : null;
  // Miniflare's option types are zod inputs too deep for tsc to check usefully here.
  const shared: Record<string, unknown> = {
    modules: true,
    modulesRoot: dirname(bundle),
    scriptPath: bundle,
    compatibilityDate: COMPATIBILITY_DATE,
    d1Databases: { DB: 'citygate-test-db' },
    queueProducers: { JOBS: { queueName: QUEUE_NAME } },
    ...(storage ? { r2Buckets: { MEDIA: 'citygate-test-media' } } : {}),
    ...(opts.assets ? { assets: { directory: opts.assets, binding: 'ASSETS', routerConfig: { has_user_worker: true }, assetConfig: { html_handling: 'auto-trailing-slash', not_found_handling: 'none' } } } : {}),
    bindings: {
      // What `citygate deploy` sets once as a Worker secret (secrets at rest, issue 15).
      CITYGATE_MASTER_KEY: 'd'.repeat(64),
      // Tests make many guest calls from one address; rate-limit tests set their own limit.
      RATE_LIMIT_GUEST_RPM: '0',
      ...(storage ? { CITYGATE_STORAGE_BINDING: 'MEDIA' } : {}),
      ...(storage?.publicUrlPrefix ? { CITYGATE_STORAGE_PUBLIC_URL: storage.publicUrlPrefix } : {}),
      ...opts.vars,
    },
  };
  // The classic ("v4") option shape, converted to this Miniflare's native one.
  const native = convertV4MiniflareOptions({
    host: '127.0.0.1',
    port: 0,
    workers: [
      { name: 'gateway', ...shared, queueConsumers: { [QUEUE_NAME]: { maxBatchTimeout: 0.05, maxRetries: 5, retryDelay: 0 } } },
      ...(opts.secondIsolate ? [{ name: 'gateway-second', ...shared, routes: ['second.local/*'] }] : []),
    ],
  } as any);
  const mf = new Miniflare({
    ...native,
    resourcePersistencePath: persistDir,
    logRequests: false,
    handleStructuredLogs: (l: { level: string; message: string }) => void (logs += `${l.level}: ${l.message}\n`),
  } as any);
  const url = (await mf.ready).origin;
  let stopped = false;
  const w: TestWorker = {
    url,
    persistDir,
    mf,
    logs: () => logs,
    async second(path, init) {
      const res = await mf.dispatchFetch(`http://second.local${path}`, init as never);
      return res as unknown as Response;
    },
    async sql<T>(query: string, ...params: unknown[]) {
      const db = await mf.getD1Database('DB');
      const r = await db.prepare(query).bind(...params).all();
      return r.results as T[];
    },
    async adminKey() {
      const rows = await w.sql<{ value: string }>(`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`);
      if (!rows[0]) throw new Error('no admin key in D1 yet');
      return rows[0].value;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await mf.dispose();
    },
    async restart() {
      await w.stop();
      return startWorker({ ...opts, bundle, persistDir });
    },
  };
  return w;
}
