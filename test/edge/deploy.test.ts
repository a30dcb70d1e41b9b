// `citygate init` and `citygate deploy` against a fake wrangler placed first on PATH: it
// records its calls, and its `deploy` bundles the entry with the config `citygate deploy`
// generated (the real wrangler) and runs that bundle in workerd (Miniflare) with that
// config's bindings and vars, so a wrong generated config fails here. Then the admin
// commands against the deployed gateway.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { tempDir } from '../helpers/gateway.ts';
import { runCli, type CliResult } from '../helpers/cli.ts';
import { wranglerBundle } from '../helpers/worker.ts';
import { validateDeclaration } from '../../src/cli/deploy/declaration.ts';
import { wranglerConfig } from '../../src/cli/deploy/wrangler-config.ts';

const ACCOUNT = 'feedc0de0123456789abcdef01234567';
const STEPS = ['declaration', 'login', 'version', 'build', 'typecheck', 'resources', 'deploy', 'register', 'verify'];

interface Call {
  kind: 'wrangler' | 'script';
  argv?: string[];
  name?: string;
  account?: string | null;
  configPath?: string | null;
  config?: any;
}

let root: string;
let bin: string;
/** What the real wrangler said about the generated config of a scaffolded project. */
let realWrangler: string;

before(async () => {
  root = tempDir('citygate-deploy-');
  bin = join(root, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'wrangler'), `#!/bin/sh\nexec "${process.execPath}" "${join(import.meta.dirname, 'fake-wrangler.ts')}" "$@"\n`);
  chmodSync(join(bin, 'wrangler'), 0o755);
  // A scaffolded project (`citygate init`) depending on this citygate, bundled by the real
  // wrangler with the config a deploy generates: what wrangler says about its bindings.
  const tmpl = join(root, 'template');
  const init = await runCli(['init', tmpl, '--target', 'edge']);
  assert.equal(init.code, 0, init.stderr);
  mkdirSync(join(tmpl, 'node_modules'));
  symlinkSync(resolve(import.meta.dirname, '../..'), join(tmpl, 'node_modules', 'citygate'), 'dir');
  const city = JSON.parse(readFileSync(join(tmpl, 'city.json'), 'utf8'));
  city.resources.storage = { type: 'r2', binding: 'MEDIA', name: 'template-media' };
  const config = join(tmpl, '.citygate-wrangler-test.json');
  writeFileSync(config, JSON.stringify(wranglerConfig(validateDeclaration(city), { databaseId: null }, { version: '0.1.0', accountId: ACCOUNT })));
  const { output } = await wranglerBundle(config, join(tmpl, 'dist'));
  realWrangler = output;
  rmSync(config);
});
// The deployed Workers stop with this process (they watch it), or here.
const sandboxes: { deployedAll(): { pid: number }[] }[] = [];
after(() => {
  for (const s of sandboxes) for (const w of s.deployedAll()) {
    try {
      process.kill(w.pid, 'SIGTERM');
    } catch {
      /* gone */
    }
  }
});

/** A scaffolded edge project whose build/typecheck scripts record that they ran. */
async function project(s: Sandbox, name: string, edit?: (city: any) => void): Promise<string> {
  const dir = join(s.dir, name);
  const r = await s.cli(['init', dir, '--target', 'edge']);
  assert.equal(r.code, 0, r.stderr);
  // Its dependency on citygate: this checkout (what `npm install` would put there).
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(resolve(import.meta.dirname, '../..'), join(dir, 'node_modules', 'citygate'), 'dir');
  writeFileSync(
    join(dir, 'record.mjs'),
    `import { appendFileSync } from 'node:fs';\nappendFileSync(process.env.FAKE_WRANGLER_LOG, JSON.stringify({ kind: 'script', name: process.argv[2] }) + '\\n');\n`,
  );
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  pkg.scripts.build = 'node record.mjs build';
  pkg.scripts.typecheck = 'node record.mjs typecheck';
  writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n');
  if (edit) {
    const city = JSON.parse(readFileSync(join(dir, 'city.json'), 'utf8'));
    edit(city);
    writeFileSync(join(dir, 'city.json'), JSON.stringify(city, null, 2) + '\n');
  }
  return dir;
}

type Sandbox = ReturnType<typeof sandbox>;

/** Its own CLI config, fake Cloudflare account state and call log. */
function sandbox(label: string) {
  const dir = mkdtempSync(join(root, `${label}-`));
  const env: Record<string, string> = {
    PATH: [bin, process.env.PATH].join(delimiter),
    CITYGATE_CONFIG: join(dir, 'config', 'config.json'),
    FAKE_WRANGLER_LOG: join(dir, 'calls.jsonl'),
    FAKE_WRANGLER_STATE: join(dir, 'cloudflare.json'),
    FAKE_WRANGLER_ACCOUNT_ID: ACCOUNT,
    FAKE_WRANGLER_REAL: resolve(import.meta.dirname, '../../node_modules/.bin/wrangler'),
    FAKE_WRANGLER_D1_DIR: join(dir, 'edge'),
    FAKE_WRANGLER_OWNER_PID: String(process.pid),
    CITYGATE_VERIFY_TIMEOUT_MS: '5000',
    CLOUDFLARE_ACCOUNT_ID: undefined as unknown as string,
    CITYGATE_ADMIN_KEY: undefined as unknown as string,
    DATABASE_PATH: undefined as unknown as string,
  };
  const calls = (): Call[] =>
    existsSync(env.FAKE_WRANGLER_LOG) ? readFileSync(env.FAKE_WRANGLER_LOG, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
  const wranglerCalls = () => calls().filter((c) => c.kind === 'wrangler');
  const cli = (args: string[], cwd?: string) => runCli(args, { env, cwd });
  const state = () => (existsSync(env.FAKE_WRANGLER_STATE) ? JSON.parse(readFileSync(env.FAKE_WRANGLER_STATE, 'utf8')) : {});
  const deployedAll = (): { url: string; controlUrl: string; pid: number; databases: string[] }[] => Object.values(state().workers ?? {});
  /** The Worker `wrangler deploy` runs for `name`: its URL and its D1 (as the operator's SQL console). */
  const deployed = (name: string) => {
    const w = state().workers?.[name];
    assert.ok(w, `no Worker ${name} deployed`);
    const sql = async <T>(query: string): Promise<T[]> => {
      const res = await fetch(`${w.controlUrl}/d1/${w.databases[0]}`, { method: 'POST', body: query });
      assert.equal(res.status, 200);
      return ((await res.json()) as { results: T[] }).results;
    };
    const adminKey = async () => (await sql<{ value: string }>(`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`))[0].value;
    return { url: w.url as string, sql, adminKey };
  };
  const s = { dir, env, calls, wranglerCalls, cli, deployed, deployedAll };
  sandboxes.push(s);
  return s;
}

const label = (c: Call) =>
  c.kind === 'script' ? `script ${c.name}` : c.argv!.slice(0, { r2: 3, d1: 2, queues: 2, secret: 2 }[c.argv![0]] ?? 1).join(' ');
const progress = (r: CliResult) => r.stdout.split('\n').filter((l) => /^[✓✗-] /.test(l)).map((l) => l.slice(2).trim().split(/\s+/)[0]);
const version = (dir: string) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version as string;
const leftovers = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('.citygate-wrangler-'));

test('the scaffolded project bundles with the real wrangler and the generated config: bindings and vars', () => {
  assert.match(realWrangler, /env\.DB \(template-db\)\s+D1 Database/);
  assert.match(realWrangler, /env\.JOBS \(template-queue\)\s+Queue/);
  assert.match(realWrangler, /env\.MEDIA \(template-media\)\s+R2 Bucket/);
  assert.match(realWrangler, /env\.CITYGATE_STORAGE_BINDING \("MEDIA"\)/);
  assert.doesNotMatch(realWrangler, /\[WARNING\]|\[ERROR\]/);
});

describe('citygate init', () => {
  test('scaffolds an edge project: city.json, package.json, entry, .gitignore, .env.example', async () => {
    const s = sandbox('init');
    const dir = join(s.dir, 'My Gateway');
    const r = await s.cli(['init', dir, '--target', 'edge']);
    assert.equal(r.code, 0, r.stderr);
    const city = JSON.parse(readFileSync(join(dir, 'city.json'), 'utf8'));
    assert.deepEqual(city, {
      schema: 1,
      type: 'city',
      name: 'my-gateway',
      target: 'cloudflare-workers',
      entry: 'src/index.ts',
      resources: { database: { binding: 'DB', name: 'my-gateway-db' }, queue: { binding: 'JOBS', name: 'my-gateway-queue' } },
    });
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    assert.ok(pkg.scripts.build && pkg.scripts.typecheck);
    assert.ok(pkg.dependencies.citygate);
    assert.match(readFileSync(join(dir, 'src/index.ts'), 'utf8'), /createWorker\(\)/);
    assert.match(readFileSync(join(dir, '.gitignore'), 'utf8'), /\.wrangler/);
    const example = readFileSync(join(dir, '.env.example'), 'utf8');
    assert.match(example, /^TEXTPROVIDER_API_KEY=$/m);
    for (const line of example.split('\n')) if (!line.startsWith('#') && line.includes('=')) assert.match(line, /^[A-Z_0-9]+=$/, 'no values');
    // Never over an existing project.
    const again = await s.cli(['init', dir, '--target', 'edge']);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /already has city\.json/);
    const node = await s.cli(['init', join(s.dir, 'n'), '--target', 'node']);
    assert.equal(node.code, 0, node.stderr);
    assert.equal(JSON.parse(readFileSync(join(s.dir, 'n', 'city.json'), 'utf8')).target, 'node');
    assert.equal((await s.cli(['init', join(s.dir, 'x'), '--target', 'mars'])).code, 1);
  });
});

// One deployed sandbox for all its steps, one after the other: 86 s alone on 2 cores, past the
// runner's 120 s per test (and per hook: the first deploy's) with a second copy of the suite beside it.
describe('citygate deploy', { timeout: 400_000 }, () => {
  let s: Sandbox;
  let dir: string;
  let first: CliResult;

  before(async () => {
    s = sandbox('deploy');
    dir = await project(s, 'edge-gw', (c) => {
      c.resources.storage = { type: 'r2', binding: 'MEDIA', name: 'edge-gw-media', public_url_prefix: 'https://media.example.com' };
    });
    first = await s.cli(['deploy', dir, '--verify', '--account-id', ACCOUNT]);
  }, { timeout: 300_000 });

  test('runs the seed steps in order, one progress line each', () => {
    assert.equal(first.code, 0, `${first.stdout}\n${first.stderr}`);
    assert.deepEqual(progress(first), STEPS);
    assert.match(first.stdout, /version\s+0\.1\.0 → 0\.1\.1/);
    assert.match(first.stdout, /database edge-gw-db \(created\), queue edge-gw-queue \(created\), storage edge-gw-media \(created\)/);
    const url = s.deployed('edge-gw').url;
    assert.match(first.stdout, new RegExp(`verify\\s+${url.replace(/[.:/]/g, '\\$&')}/health ok`));
    assert.equal(version(dir), '0.1.1');
  });

  test('calls wrangler and the scripts in that order', () => {
    assert.deepEqual(s.calls().map(label), [
      'whoami',
      'script build',
      'script typecheck',
      'd1 list',
      'd1 create',
      'queues list',
      'queues create',
      'r2 bucket list',
      'r2 bucket create',
      'deploy',
      'secret list',
      'secret put',
      'd1 execute',
    ]);
  });

  test('the first deploy sets the master key Worker secret once, through stdin, and shows it once', () => {
    const put = s.wranglerCalls().find((c) => c.argv![0] === 'secret' && c.argv![1] === 'put')!;
    assert.deepEqual(put.argv!.slice(0, 3), ['secret', 'put', 'CITYGATE_MASTER_KEY']);
    const shown = /generated the master key[^\n]*\n\n\s+(\S+)/.exec(first.stdout)?.[1];
    assert.ok(shown && /^[A-Za-z0-9_-]{43}$/.test(shown), first.stdout);
    assert.equal(put.argv!.includes(shown), false, 'the key is never on the command line');
    assert.match(first.stdout, /deploy\s+.*\(master key secret set\)/);
  });

  test('--account-id reaches every wrangler call (CLOUDFLARE_ACCOUNT_ID) and the generated config', () => {
    const calls = s.wranglerCalls();
    assert.equal(calls.length, 11);
    for (const c of calls) assert.equal(c.account, ACCOUNT, `${label(c)} got the account id`);
    const deploy = calls.find((c) => c.argv![0] === 'deploy')!;
    assert.equal(deploy.config.account_id, ACCOUNT);
  });

  test('deploys with a temporary generated config that is gone afterwards', () => {
    const deploy = s.wranglerCalls().find((c) => c.argv![0] === 'deploy')!;
    assert.ok(deploy.configPath && deploy.config, 'the config existed while wrangler ran');
    assert.equal(existsSync(deploy.configPath), false);
    assert.deepEqual(leftovers(dir), []);
    const c = deploy.config;
    assert.equal(c.name, 'edge-gw');
    assert.equal(c.main, 'src/index.ts');
    const created = JSON.parse(readFileSync(s.env.FAKE_WRANGLER_STATE, 'utf8'));
    assert.deepEqual(c.d1_databases, [{ binding: 'DB', database_name: 'edge-gw-db', database_id: created.databases[0].uuid }]);
    assert.deepEqual(c.queues.producers, [{ binding: 'JOBS', queue: 'edge-gw-queue' }]);
    assert.equal(c.queues.consumers[0].queue, 'edge-gw-queue');
    assert.deepEqual(c.r2_buckets, [{ binding: 'MEDIA', bucket_name: 'edge-gw-media' }]);
    assert.equal(c.vars.CITYGATE_STORAGE_PUBLIC_URL, 'https://media.example.com');
    assert.equal(c.vars.CITYGATE_VERSION, '0.1.1');
    // The admin console goes up as the Worker's static assets.
    assert.match(c.assets.directory, /console\/dist$/);
    assert.ok(existsSync(join(c.assets.directory, 'console/index.html')));
    const exec = s.wranglerCalls().find((x) => x.argv![1] === 'execute')!;
    assert.ok(exec.argv!.includes(`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`));
    assert.ok(exec.argv!.includes('--remote'));
    // The fake honours the database it is given: another name is wrangler's error, not this D1.
    const wrong = spawnSync(join(bin, 'wrangler'), ['d1', 'execute', 'other-db', '--remote', '--json', '--command', 'SELECT 1'], { env: { ...process.env, ...s.env }, encoding: 'utf8' });
    assert.equal(wrong.status, 1);
    assert.match(wrong.stderr, /Couldn't find a D1 DB with the name or binding 'other-db'/);
  });

  test('registers the URL and admin key as the current gateway in a 0600 config file', async () => {
    const path = s.env.CITYGATE_CONFIG;
    assert.equal(statSync(path).mode & 0o777, 0o600);
    const config = JSON.parse(readFileSync(path, 'utf8'));
    assert.equal(config.current, 'edge-gw');
    const w = s.deployed('edge-gw');
    assert.equal(config.gateways['edge-gw'].url, w.url);
    assert.equal(config.gateways['edge-gw'].admin_key, await w.adminKey(), 'the key in the deployed Worker’s D1');
  });

  test('the registered gateway and its admin key work with `citygate cities list`', async () => {
    const created = await s.cli(['cities', 'create', 'Deployed City', '--id', 'deployed']);
    assert.equal(created.code, 0, created.stderr);
    const list = await s.cli(['cities', 'list']);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^CITY ID\s+NAME\s+STATUS/m);
    assert.match(list.stdout, /^deployed\s+Deployed City\s+active/m);
    const json = await s.cli(['cities', 'list', '--json']);
    assert.ok(JSON.parse(json.stdout).items.some((c: { city_id: string }) => c.city_id === 'deployed'));
  });

  test('admin commands: tokens, env, cities transitions, admin-key (tables by default, --json for scripts)', async () => {
    const tok = await s.cli(['tokens', 'apply', '--city', 'deployed', '--user', 'alice', '--json']);
    assert.equal(tok.code, 0, tok.stderr);
    const t = JSON.parse(tok.stdout);
    assert.equal(t.city_id, 'deployed');
    assert.match(t.user_token, /^eyJ/);

    assert.equal((await s.cli(['env', 'set', 'TEXTPROVIDER_API_KEY', 'sk-edge-0123456789abcdef'])).code, 0);
    assert.equal((await s.cli(['env', 'set', 'GATEWAY_CITY_BASE_URL=https://city.example.com'])).code, 0);
    const envTable = await s.cli(['env', 'list']);
    assert.match(envTable.stdout, /^KEY\s+VALUE\s+SECRET/m);
    assert.match(envTable.stdout, /^TEXTPROVIDER_API_KEY\s+••••••••cdef\s+true/m);
    assert.ok(!envTable.stdout.includes('sk-edge-0123456789abcdef'));
    const revealed = JSON.parse((await s.cli(['env', 'list', '--reveal', '--json'])).stdout);
    assert.equal(revealed.items.find((e: { key: string }) => e.key === 'TEXTPROVIDER_API_KEY').value, 'sk-edge-0123456789abcdef');
    const file = join(s.dir, 'prod.env');
    writeFileSync(file, 'OAUTH_A_CLIENT_ID=abc\nOAUTH_A_CLIENT_SECRET="s3cret value"\n');
    const imported = await s.cli(['env', 'import', file, '--json']);
    assert.equal(JSON.parse(imported.stdout).imported, 2);
    assert.equal((await s.cli(['env', 'rm', 'OAUTH_A_CLIENT_ID'])).code, 0);
    const missing = await s.cli(['env', 'rm', 'OAUTH_A_CLIENT_ID']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^citygate env: 404 env_key_not_found: /m);

    assert.match((await s.cli(['cities', 'pause', 'deployed'])).stdout, /^deployed\s+Deployed City\s+paused/m);
    assert.match((await s.cli(['cities', 'activate', 'deployed'])).stdout, /^deployed\s+Deployed City\s+active/m);
    const dup = await s.cli(['cities', 'create', 'Again', '--id', 'deployed']);
    assert.equal(dup.code, 1);
    assert.match(dup.stderr, /409 city_exists/);

    const key = await s.deployed('edge-gw').adminKey();
    const masked = await s.cli(['admin-key']);
    assert.equal(masked.code, 0, masked.stderr);
    assert.ok(!masked.stdout.includes(key), 'masked by default');
    assert.equal((await s.cli(['admin-key', '--show'])).stdout.trim(), key);
  });

  test('models and usage call the gateway and print its answer or its error cleanly', async () => {
    const models = await s.cli(['models']);
    assert.equal(models.code, 0, models.stderr);
    assert.match(models.stdout, /^ID\s+NAME\s+MODALITIES\s+REQUIRES/m);
    assert.match(models.stdout, /^openai\/gpt-image-1\s+/m);
    const json = JSON.parse((await s.cli(['models', '--json'])).stdout);
    assert.ok(json.items.every((m: object) => 'env_requirements' in m), 'the admin view');
    // The deployed Worker mounts the usage service: its summary (nothing used yet), and a
    // gateway error as one clean line.
    const usage = await s.cli(['usage']);
    assert.equal(usage.code, 0, usage.stderr);
    assert.match(usage.stdout, /^usage from \d{4}-\d{2}-\d{2} to \d{4}-\d{2}-\d{2} \(UTC days\)\n\(none\)$/m);
    assert.match(usage.stdout, /^total: 0 calls, 0 errors, /m);
    const bad = await s.cli(['usage', 'list', '--status', 'weird']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^citygate usage: 400 [a-z_]+: /m);
    assert.ok(!bad.stderr.includes('    at '), 'no stack trace');
  });

  test('gateways: list, add, use, remove; --gateway URL with CITYGATE_ADMIN_KEY', async () => {
    const list = await s.cli(['gateways', 'list']);
    assert.match(list.stdout, /^\*\s+edge-gw\s+http:\/\/127\.0\.0\.1:\d+\s+cg_admin_/m);
    const worker = s.deployed('edge-gw');
    assert.ok(!list.stdout.includes(await worker.adminKey()));
    const add = await s.cli(['gateways', 'add', worker.url, '--name', 'other', '--admin-key', 'cg_admin_wrong-key-000000000000000', '--no-use']);
    assert.equal(add.code, 0, add.stderr);
    assert.equal((await s.cli(['gateways', 'use', 'other'])).code, 0);
    const refused = await s.cli(['cities', 'list']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /401 invalid_token/);
    const byUrl = await runCli(['cities', 'list', '--gateway', worker.url + '/', '--json'], { env: { ...s.env, CITYGATE_ADMIN_KEY: await worker.adminKey() } });
    assert.equal(byUrl.code, 0, byUrl.stderr);
    assert.equal((await s.cli(['gateways', 'use', 'edge-gw'])).code, 0);
    assert.equal((await s.cli(['gateways', 'remove', 'other'])).code, 0);
    const json = JSON.parse((await s.cli(['gateways', 'list', '--json'])).stdout);
    assert.deepEqual(json.items.map((g: { name: string }) => g.name), ['edge-gw']);
    assert.equal(json.current, 'edge-gw');
    const unknown = await s.cli(['gateways', 'frobnicate']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /unknown subcommand/);
  });

  test('a redeploy finds the resources, bumps the version again and keeps the data', async () => {
    const before = s.calls().length;
    const r = await s.cli(['deploy', '--account-id', ACCOUNT], dir);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /database edge-gw-db \(found\), queue edge-gw-queue \(found\), storage edge-gw-media \(found\)/);
    assert.match(r.stdout, /- verify\s+skipped/);
    const calls = s.calls().slice(before).map(label);
    assert.ok(!calls.some((c) => c.endsWith('create')), calls.join(', '));
    assert.ok(calls.includes('secret list') && !calls.includes('secret put'), 'the master key is set once, never replaced');
    assert.doesNotMatch(r.stdout, /generated the master key/);
    assert.equal(version(dir), '0.1.2');
    const list = await s.cli(['cities', 'list', '--json']);
    assert.ok(JSON.parse(list.stdout).items.some((c: { city_id: string }) => c.city_id === 'deployed'));
  });

  test('--verify-only runs only the health check', async () => {
    const before = s.calls().length;
    const r = await s.cli(['deploy', dir, '--verify-only']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(progress(r), ['verify']);
    assert.equal(s.calls().length, before, 'no wrangler call, no script');
    assert.equal(version(dir), '0.1.2');
  });
});

describe('citygate deploy --dry-run', () => {
  test('creates nothing, changes no version, registers nothing and leaves no config behind', async () => {
    const s = sandbox('dry');
    const dir = await project(s, 'dry-gw');
    const r = await s.cli(['deploy', dir, '--dry-run', '--account-id', ACCOUNT]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.deepEqual(progress(r), STEPS);
    assert.match(r.stdout, /database dry-gw-db \(pending: dry run\), queue dry-gw-queue \(pending: dry run\)/);
    const labels = s.calls().map(label);
    assert.ok(!labels.some((l) => l.endsWith('create')), labels.join(', '));
    const deploy = s.wranglerCalls().find((c) => c.argv![0] === 'deploy')!;
    assert.ok(deploy.argv!.includes('--dry-run'));
    assert.ok(!labels.includes('d1 execute'));
    assert.equal(version(dir), '0.1.0');
    assert.deepEqual(leftovers(dir), []);
    assert.equal(existsSync(s.env.CITYGATE_CONFIG), false);
    assert.equal(existsSync(s.env.FAKE_WRANGLER_STATE), false, 'no resource was created');
  });
});

describe('citygate deploy refuses clearly and changes nothing', () => {
  const cases: [string, (c: any) => void, RegExp][] = [
    ['missing name', (c) => delete c.name, /name: missing: add "name"/],
    ['wrong type', (c) => (c.type = 'town'), /type: must be "city"/],
    ['bad storage', (c) => (c.resources.storage = { type: 's3', binding: 'MEDIA' }), /resources\.storage\.type: must be "r2"[\s\S]*resources\.storage\.name: missing/],
    ['a secret in the declaration', (c) => (c.TEXTPROVIDER_API_KEY = 'sk-1'), /TEXTPROVIDER_API_KEY: secrets and provider keys never go in city\.json/],
  ];
  for (const [what, edit, message] of cases) {
    test(what, async () => {
      const s = sandbox('bad');
      const dir = await project(s, 'bad-gw', edit);
      const cityBefore = readFileSync(join(dir, 'city.json'), 'utf8');
      const r = await s.cli(['deploy', dir, '--verify']);
      assert.equal(r.code, 1);
      assert.deepEqual(progress(r), ['declaration']);
      assert.match(r.stdout, /✗ declaration/);
      assert.match(r.stdout, message);
      assert.match(r.stderr, /fix: edit city\.json/);
      assert.deepEqual(s.calls(), []);
      assert.equal(version(dir), '0.1.0');
      assert.equal(readFileSync(join(dir, 'city.json'), 'utf8'), cityBefore);
      assert.equal(existsSync(s.env.CITYGATE_CONFIG), false);
    });
  }

  test('a remote URL as the directory', async () => {
    const s = sandbox('url');
    for (const target of ['https://github.com/example/gw.git', 'git@github.com:example/gw.git']) {
      const r = await s.cli(['deploy', target]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /remote address: citygate deploys only local project directories/);
    }
    assert.deepEqual(s.calls(), []);
  });

  test('not logged in to Cloudflare: the step, the output and the fix; the version is untouched', async () => {
    const s = sandbox('logout');
    const dir = await project(s, 'out-gw');
    const r = await runCli(['deploy', dir], { env: { ...s.env, FAKE_WRANGLER_LOGGED_OUT: '1' } });
    assert.equal(r.code, 1);
    assert.deepEqual(progress(r), ['declaration', 'login']);
    assert.match(r.stdout, /✗ login\s+failed: not logged in to Cloudflare/);
    assert.match(r.stderr, /"loggedIn": ?false/);
    assert.match(r.stderr, /fix: run `npx wrangler login`/);
    assert.equal(version(dir), '0.1.0');
  });

  test('no wrangler anywhere', async () => {
    const s = sandbox('nowrangler');
    const dir = await project(s, 'none-gw');
    const r = await runCli(['deploy', dir], { env: { ...s.env, PATH: '/usr/bin:/bin' } });
    assert.equal(r.code, 1);
    assert.match(r.stdout, /✗ login\s+failed: wrangler was not found/);
    assert.match(r.stderr, /npm install --save-dev wrangler/);
  });
});
