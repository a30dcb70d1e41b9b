// A stand-in for `wrangler`, placed first on PATH by the deploy tests. It records every
// call (argv, account id from the environment, the --config file as it was at call time)
// as a JSON line in $FAKE_WRANGLER_LOG, keeps created resources in $FAKE_WRANGLER_STATE,
// and prints what wrangler 4 prints.
//
// `deploy` does what Cloudflare would do with the config and entry it is given: the real
// wrangler ($FAKE_WRANGLER_REAL) checks the config and bundles its `main`, then the bundle
// runs in workerd through Miniflare (fake-wrangler-serve.ts) with that config's bindings and
// vars, its data under $FAKE_WRANGLER_D1_DIR; a redeploy replaces it at the same URL. So a
// wrong generated config or entry fails the deploy or the Worker, as it would for real.
// `d1 execute <name> --remote` runs the SQL on the D1 database of that name (unknown name:
// wrangler's error), through the deployed Worker that binds it.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';

const argv = process.argv.slice(2);
const env = process.env;
const ACCOUNT = env.FAKE_WRANGLER_ACCOUNT_ID ?? '0123456789abcdef0123456789abcdef';

function flag(name: string): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}

const configPath = flag('--config');
let config: unknown = null;
if (configPath && existsSync(configPath)) config = JSON.parse(readFileSync(configPath, 'utf8'));
appendFileSync(
  env.FAKE_WRANGLER_LOG!,
  JSON.stringify({ kind: 'wrangler', argv, cwd: process.cwd(), account: env.CLOUDFLARE_ACCOUNT_ID ?? null, configPath: configPath ?? null, config }) + '\n',
);

interface Deployed {
  url: string;
  controlUrl: string;
  pid: number;
  port: number;
  databases: string[];
}
interface State {
  secrets?: Record<string, string>;
  databases: { uuid: string; name: string; created_at: string }[];
  queues: { queue_id: string; queue_name: string; created_on: string }[];
  buckets: { name: string; creation_date: string }[];
  workers?: Record<string, Deployed>;
}
const statePath = env.FAKE_WRANGLER_STATE!;
const state: State = existsSync(statePath) ? JSON.parse(readFileSync(statePath, 'utf8')) : { databases: [], queues: [], buckets: [] };
state.workers ??= {};
const save = () => writeFileSync(statePath, JSON.stringify(state, null, 2));
const banner = () => console.log(`\n ⛅️ wrangler 4.164.0\n────────────────────`);
const uuid = () => crypto.randomUUID();
const now = new Date().toISOString();

function boxTable(rows: Record<string, string>[]): string {
  if (rows.length === 0) return '';
  const cols = Object.keys(rows[0]);
  const w = cols.map((c) => Math.max(c.length, ...rows.map((r) => r[c].length)));
  const line = (l: string, m: string, r: string) => l + w.map((n) => '─'.repeat(n + 2)).join(m) + r;
  const row = (vals: string[]) => '│' + vals.map((v, i) => ` ${v.padEnd(w[i])} `).join('│') + '│';
  return [line('┌', '┬', '┐'), row(cols), line('├', '┼', '┤'), ...rows.map((r) => row(cols.map((c) => r[c]))), line('└', '┴', '┘')].join('\n');
}

const cmd = argv.filter((a) => !a.startsWith('-')).slice(0, 3).join(' ');
async function main(): Promise<number> {
  if (argv[0] === 'whoami') {
    if (env.FAKE_WRANGLER_LOGGED_OUT) {
      console.log(JSON.stringify({ loggedIn: false }));
      return 1;
    }
    console.log(JSON.stringify({ loggedIn: true, authType: 'OAuth Token', email: 'ops@example.com', accounts: [{ name: 'Example Ops', id: ACCOUNT }] }, null, 2));
    return 0;
  }
  if (cmd.startsWith('d1 list')) {
    console.log(JSON.stringify(state.databases.map((d) => ({ ...d, version: 'production', num_tables: 0, file_size: 0 })), null, 2));
    return 0;
  }
  if (cmd.startsWith('d1 create')) {
    const name = argv[2];
    const id = uuid();
    state.databases.push({ uuid: id, name, created_at: now });
    save();
    banner();
    console.log(`✅ Successfully created DB '${name}' in region WEUR\nCreated your new D1 database.\n`);
    console.log(`To access your new D1 Database in your Worker, add the following snippet to your configuration file:\n${JSON.stringify({ d1_databases: [{ binding: name.replace(/-/g, '_'), database_name: name, database_id: id }] }, null, 2)}`);
    return 0;
  }
  if (cmd.startsWith('d1 execute')) {
    const name = argv[2];
    const sql = flag('--command')!;
    const db = state.databases.find((d) => d.name === name);
    if (!db) {
      console.error(`✘ [ERROR] Couldn't find a D1 DB with the name or binding '${name}' in your wrangler.json file.`);
      return 1;
    }
    let results: unknown[];
    const live = Object.values(state.workers!).find((w) => w.databases.includes(db.uuid) && alive(w.pid));
    if (live) {
      const res = await fetch(`${live.controlUrl}/d1/${encodeURIComponent(db.uuid)}`, { method: 'POST', body: sql });
      const out = (await res.json()) as { results?: unknown[]; error?: string };
      if (!res.ok) {
        console.error(`✘ [ERROR] ${out.error}`);
        return 1;
      }
      results = out.results!;
    } else {
      // No Worker of this account binds it right now: open the database by itself.
      const native = convertV4MiniflareOptions({ modules: true, script: 'export default { fetch: () => new Response(null) }', compatibilityDate: '2025-09-01', d1Databases: { DB: db.uuid } } as any);
      const mf = new Miniflare({ ...native, resourcePersistencePath: env.FAKE_WRANGLER_D1_DIR } as any);
      try {
        results = (await (await mf.getD1Database('DB')).prepare(sql).all()).results;
      } catch (e) {
        console.error(`✘ [ERROR] ${String(e)}`);
        return 1;
      } finally {
        await mf.dispose();
      }
    }
    console.log(JSON.stringify([{ results, success: true, meta: { served_by: 'v3-prod', duration: 0.2, changes: 0, rows_read: results.length, rows_written: 0 } }], null, 2));
    return 0;
  }
  if (cmd.startsWith('queues list')) {
    banner();
    console.log(
      boxTable(
        state.queues.map((q) => ({ id: q.queue_id, name: q.queue_name, created_on: q.created_on, modified_on: q.created_on, producers: '0', consumers: '0' })),
      ),
    );
    return 0;
  }
  if (cmd.startsWith('queues create')) {
    const name = argv[2];
    state.queues.push({ queue_id: uuid().replace(/-/g, ''), queue_name: name, created_on: now });
    save();
    banner();
    console.log(`🌀 Creating queue '${name}'\n✅ Created queue '${name}'`);
    return 0;
  }
  if (cmd.startsWith('r2 bucket list')) {
    banner();
    console.log('Listing buckets...');
    console.log(state.buckets.map((b) => `name:           ${b.name}\ncreation_date:  ${b.creation_date}`).join('\n\n'));
    return 0;
  }
  if (cmd.startsWith('r2 bucket create')) {
    const name = argv[3];
    state.buckets.push({ name, creation_date: now });
    save();
    banner();
    console.log(`Creating bucket '${name}'...\n✅ Created bucket '${name}' with default storage class of Standard.`);
    return 0;
  }
  if (argv[0] === 'secret' && argv[1] === 'list') {
    // wrangler 4 prints the JSON list (default --format json), without a banner.
    console.log(JSON.stringify(Object.keys(state.secrets ?? {}).map((name) => ({ name, type: 'secret_text' })), null, 2));
    return 0;
  }
  if (argv[0] === 'secret' && argv[1] === 'put') {
    const value = readFileSync(0, 'utf8').trim(); // stdin, as wrangler reads a piped secret
    if (!value) {
      console.error('✘ [ERROR] Secret value is empty');
      return 1;
    }
    state.secrets = { ...state.secrets, [argv[2]]: value };
    save();
    banner();
    console.log(`🌀 Creating the secret for the Worker "${(config as { name?: string })?.name ?? 'worker'}"\n✨ Success! Uploaded secret ${argv[2]}`);
    return 0;
  }
  if (argv[0] === 'deploy') {
    if (!config || !configPath) {
      console.error('✘ [ERROR] Missing entry-point: no configuration file');
      return 1;
    }
    const c = config as { name: string; d1_databases?: { database_id: string }[] };
    banner();
    // The real wrangler checks the config and bundles its entry (without uploading anything).
    const outdir = flag('--outdir') ?? join(dirname(statePath), 'bundles', `${c.name}-${Date.now()}`);
    const real = spawnSync(env.FAKE_WRANGLER_REAL!, ['deploy', '--dry-run', '--outdir', outdir, '--config', configPath], {
      cwd: dirname(configPath),
      encoding: 'utf8',
      env: { ...env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
    });
    if (real.status !== 0) {
      console.error(`${real.stdout}\n${real.stderr}`);
      return 1;
    }
    console.log('Total Upload: 1378.60 KiB / gzip: 228.49 KiB');
    if (argv.includes('--dry-run')) {
      console.log('--dry-run: exiting now.');
      return 0;
    }
    // Replace a running version of this Worker, at the same address.
    const previous = state.workers![c.name];
    if (previous && alive(previous.pid)) {
      process.kill(previous.pid, 'SIGTERM');
      for (const end = Date.now() + 30_000; alive(previous.pid) && Date.now() < end; ) await new Promise((r) => setTimeout(r, 50));
    }
    const bundle = join(outdir, readdirJs(outdir));
    const infoPath = join(dirname(statePath), `${c.name}-${Date.now()}.json`);
    const specPath = `${infoPath}.spec`;
    mkdirSync(env.FAKE_WRANGLER_D1_DIR!, { recursive: true });
    writeFileSync(specPath, JSON.stringify({ bundle, config, persistDir: env.FAKE_WRANGLER_D1_DIR, port: previous?.port ?? 0, ownerPid: Number(env.FAKE_WRANGLER_OWNER_PID), infoPath }));
    const log = openSync(`${infoPath}.log`, 'a');
    const child = spawn(process.execPath, [join(import.meta.dirname, 'fake-wrangler-serve.ts'), specPath], { detached: true, stdio: ['ignore', log, log] });
    child.unref();
    let exited = false;
    child.once('exit', () => (exited = true));
    for (const end = Date.now() + 60_000; !existsSync(infoPath); ) {
      if (exited || Date.now() > end) {
        console.error(`✘ [ERROR] the Worker did not start:\n${readFileSync(`${infoPath}.log`, 'utf8')}`);
        return 1;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const info = JSON.parse(readFileSync(infoPath, 'utf8')) as { url: string; controlUrl: string; pid: number };
    state.workers![c.name] = { ...info, port: Number(new URL(info.url).port), databases: (c.d1_databases ?? []).map((d) => d.database_id) };
    save();
    console.log(`Uploaded ${c.name} (2.31 sec)\nDeployed ${c.name} triggers (0.42 sec)\n  ${info.url}\nCurrent Version ID: ${uuid()}`);
    return 0;
  }
  console.error(`✘ [ERROR] fake wrangler: unknown command ${argv.join(' ')}`);
  return 1;
}
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function readdirJs(dir: string): string {
  const js = readdirSync(dir).filter((f) => f.endsWith('.js'));
  if (js.length !== 1) throw new Error(`expected one bundle in ${dir}, found: ${js.join(', ')}`);
  return js[0];
}

process.exitCode = await main();
