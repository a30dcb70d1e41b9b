// A stand-in for `wrangler`, placed first on PATH by the deploy tests. It records every
// call (argv, account id from the environment, the --config file as it was at call time)
// as a JSON line in $FAKE_WRANGLER_LOG, keeps created resources in $FAKE_WRANGLER_STATE,
// and prints what wrangler 4 prints. `deploy` reports $FAKE_WRANGLER_DEPLOY_URL (a
// Miniflare-served copy of the Worker); `d1 execute` runs the SQL on that Worker's local
// D1 files under $FAKE_WRANGLER_D1_DIR.
import { appendFileSync, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

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

interface State {
  secrets?: Record<string, string>;
  databases: { uuid: string; name: string; created_at: string }[];
  queues: { queue_id: string; queue_name: string; created_on: string }[];
  buckets: { name: string; creation_date: string }[];
}
const statePath = env.FAKE_WRANGLER_STATE!;
const state: State = existsSync(statePath) ? JSON.parse(readFileSync(statePath, 'utf8')) : { databases: [], queues: [], buckets: [] };
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

function findSqlite(dir: string): string[] {
  const out: string[] = [];
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) out.push(...findSqlite(p));
    else if (f.endsWith('.sqlite')) out.push(p);
  }
  return out;
}

const cmd = argv.filter((a) => !a.startsWith('-')).slice(0, 3).join(' ');
function main(): number {
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
    const sql = flag('--command')!;
    const file = findSqlite(env.FAKE_WRANGLER_D1_DIR!).find((f) => {
      const db = new DatabaseSync(f, { readOnly: true });
      try {
        return !!db.prepare(`SELECT name FROM sqlite_master WHERE name = 'env'`).get();
      } finally {
        db.close();
      }
    });
    if (!file) {
      console.error('✘ [ERROR] no such table: env: SQLITE_ERROR');
      return 1;
    }
    const db = new DatabaseSync(file, { readOnly: true });
    const results = db.prepare(sql).all();
    db.close();
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
    if (!config) {
      console.error('✘ [ERROR] Missing entry-point: no configuration file');
      return 1;
    }
    const c = config as { name: string };
    banner();
    console.log('Total Upload: 1378.60 KiB / gzip: 228.49 KiB');
    if (argv.includes('--dry-run')) {
      console.log('--dry-run: exiting now.');
      return 0;
    }
    console.log(`Uploaded ${c.name} (2.31 sec)\nDeployed ${c.name} triggers (0.42 sec)\n  ${env.FAKE_WRANGLER_DEPLOY_URL}\nCurrent Version ID: ${uuid()}`);
    return 0;
  }
  console.error(`✘ [ERROR] fake wrangler: unknown command ${argv.join(' ')}`);
  return 1;
}
process.exitCode = main();
