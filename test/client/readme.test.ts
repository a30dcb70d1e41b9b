// The README tells the truth: its quick start runs verbatim in a fresh copy of the repository,
// its test command is what CI runs, and its container commands are the Dockerfile's.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../helpers/gateway.ts';
import { until } from '../helpers/wait.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const compose = readFileSync(join(ROOT, 'compose.yaml'), 'utf8');

/** The commands of the first ```sh block under a heading, comments removed. */
function shBlock(heading: string): string[] {
  const at = readme.indexOf(`\n## ${heading}\n`);
  assert.ok(at >= 0, `README has no "## ${heading}"`);
  const m = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m, `no sh block under ${heading}`);
  return m[1]
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter(Boolean);
}

const quickStart = () => {
  const [start, testCmd, ...rest] = shBlock('Quick start');
  assert.deepEqual(rest, []);
  return { start, testCmd };
};

/** The Dockerfile's ENV, CMD, EXPOSE and VOLUME. */
function parseDockerfile() {
  const text = dockerfile.replace(/\\\n/g, ' ');
  const env: Record<string, string> = {};
  for (const line of text.split('\n').filter((l) => l.startsWith('ENV '))) {
    for (const m of line.slice(4).matchAll(/([A-Z_]+)=(\S+)/g)) env[m[1]] = m[2];
  }
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(text)![1]) as string[];
  const expose = /^EXPOSE (\d+)$/m.exec(text)![1];
  const volume = JSON.parse(/^VOLUME (\[.*\])$/m.exec(text)![1]) as string[];
  return { env, cmd, expose, volume };
}

test('the quick start: the start command and `npm test`, which is what .ci/run runs', () => {
  const { start, testCmd } = quickStart();
  assert.equal(start, 'npm install && npm start');
  assert.equal(testCmd, 'npm test');
  const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  assert.ok(ci.includes(testCmd), `.ci/run does not run \`${testCmd}\``);
  // (npm run test:agents, the real agent clients, runs beside it: a suite of its own)
  assert.equal(ci.filter((l) => /\bnode --test\b|npm (run )?test(\s|$)/.test(l)).length, 1, 'CI runs the tests one way: the README’s');
  assert.match(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.test, /node test\/run\.ts$/);
});

const portFree = (port: number) =>
  new Promise<boolean>((r) => {
    const s = createServer();
    s.once('error', () => r(false));
    s.listen(port, '127.0.0.1', () => s.close(() => r(true)));
  });

/**
 * Runs a shell command in `cwd` until `ready` matches its output; answers the match, a stop (its
 * process group gets SIGTERM; answers the first process's exit code) and `gone`, which settles
 * once every process that holds its output has ended: the shell exits at once on SIGTERM, while
 * the gateway it started (under npm) is still finishing its graceful stop.
 */
async function runUntil(command: string | string[], cwd: string, env: NodeJS.ProcessEnv, ready: RegExp, ms: number) {
  const [file, ...args] = typeof command === 'string' ? ['sh', '-c', command] : command;
  const child = spawn(file, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const gone = Promise.all([child.stdout!, child.stderr!].map((s) => new Promise((r) => s.once('close', r))));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGTERM');
    return exited;
  };
  process.once('exit', () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  const match = await new Promise<RegExpExecArray>((resolveMatch, reject) => {
    const fail = (e: Error) => void stop().finally(() => reject(e));
    const timer = setTimeout(() => fail(new Error(`\`${command}\` not ready in ${ms} ms:\n${out}`)), ms);
    const check = () => {
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolveMatch(m);
      }
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`\`${command}\` exited with ${code}:\n${out}`));
    });
  });
  return { match, stop, gone, output: () => out, pid: child.pid! };
}

// A fresh copy of the committed tree (`git archive HEAD`: no node_modules, data or local
// files). `npm install` there installs from npm's cache (warm after CI's `npm ci`) and builds the
// console: about 45 s alone, up to ~2 min beside the rest of the suite on 2 cores.
// (A node_modules symlinked to this checkout's does not help: npm replaces the link with a
// directory and installs anyway, leaving the link's target alone.) Under heavier load npm install
// alone has taken up to ~170 s: this test has its own generous deadline.
test('the quick start runs verbatim in a fresh copy of the repository', { timeout: 600_000 }, async () => {
  const { start } = quickStart();
  const dir = tempDir('citygate-quickstart-');
  execFileSync('sh', ['-c', `git -C "${ROOT}" archive HEAD | tar -x -C "${dir}"`]);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
    npm_config_prefer_offline: 'true',
  };
  // The README's address is checked on every run: the command runs in a private network
  // namespace of its own (unshare: user + net), where 43127 is always free whatever else runs
  // on this machine; the test reaches it from inside that namespace (nsenter). Without user
  // namespaces it runs here and needs 43127 free: a busy port fails, it never skips the check.
  const isolated = spawnSync('unshare', ['-rn', 'true']).status === 0;
  if (!isolated) assert.ok(await portFree(43127), 'port 43127 is busy and this machine has no user namespaces to run the quick start apart');
  const command = isolated ? ['unshare', '-rn', 'sh', '-c', 'ip link set lo up && exec sh -c "$0"', start] : start;
  const run = await runUntil(command, dir, env, /listening on (http:\/\/\S+)/, 480_000);
  /** GET url from where the gateway runs: status and body, or null when nothing answers. */
  const get = (url: string): { status: number; text: string } | null => {
    const script = `fetch(${JSON.stringify(url)}).then(async (r) => console.log(JSON.stringify({ status: r.status, text: await r.text() })), () => console.log('null'))`;
    const argv = [process.execPath, '-e', script];
    const r = isolated
      ? spawnSync('nsenter', ['-t', String(run.pid), '-U', '-n', '--preserve-credentials', ...argv], { encoding: 'utf8' })
      : spawnSync(argv[0], argv.slice(1), { encoding: 'utf8' });
    return r.status === 0 ? JSON.parse(r.stdout) : null; // nsenter fails once the namespace is gone
  };
  try {
    const url = run.match[1];
    assert.equal(url, 'http://127.0.0.1:43127', 'the README’s address');
    const h = get(`${url}/health`);
    assert.equal(h?.status, 200);
    const health = JSON.parse(h!.text) as { ok: boolean; services: string[] };
    assert.equal(health.ok, true);
    assert.deepEqual(health.services, ['env', 'cities', 'bureaus', 'accounts', 'balance', 'plans', 'payment', 'usage', 'ai', 'webhooks', 'mcp']);
    assert.ok(existsSync(join(dir, 'data/citygate.sqlite')), 'the README’s database path');
    assert.match(run.output(), /generated the admin key/);
    // `npm install` built the admin console (the prepare script): /console works at once.
    const index = get(`${url}/console/`);
    assert.equal(index?.status, 200, 'the console is built by npm install');
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(index!.text);
    assert.ok(script, 'the console page loads its script');
    assert.equal(get(url + script[1])?.status, 200);
    await run.stop();
    let stopped = false;
    void run.gone.then(() => (stopped = true));
    await until('the gateway (under npm) to stop on SIGTERM', () => stopped, 30_000);
    assert.equal(get(`${url}/health`), null);
  } finally {
    await run.stop();
    // Its 1.2 GB of node_modules go now, inside this test's own deadline: left to tempDir's exit
    // hook, a loaded disk made the file's process take over npm test's 120 s to exit (CI, stop 47).
    await rm(dir, { recursive: true, force: true });
  }
});

test('the container: the README states the Dockerfile’s and compose.yaml’s settings and commands', () => {
  const d = parseDockerfile();
  // The seed's container deployment.
  assert.deepEqual(
    { HOST: d.env.HOST, PORT: d.env.PORT, LOCAL_LOGIN: d.env.LOCAL_LOGIN, DATABASE_PATH: d.env.DATABASE_PATH },
    { HOST: '0.0.0.0', PORT: '43127', LOCAL_LOGIN: 'false', DATABASE_PATH: '/data/citygate.sqlite' },
  );
  assert.deepEqual(d.volume, ['/data']);
  assert.equal(d.expose, d.env.PORT);
  assert.match(dockerfile, /^FROM node:24/m);
  // What the README says about the image.
  const section = readme.slice(readme.indexOf('## Deploying as a container'), readme.indexOf('## Deploying to the edge'));
  for (const k of ['HOST', 'PORT', 'LOCAL_LOGIN', 'DATABASE_PATH']) assert.ok(section.includes(`\`${k}=${d.env[k]}\``), `README: ${k}=${d.env[k]}`);
  assert.ok(section.includes(`\`${d.cmd.join(' ')}\``), `README states the command ${d.cmd.join(' ')}`);
  assert.ok(section.includes(`\`${d.volume[0]}\``));
  // The commands it gives.
  const program = d.cmd.slice(0, -1).join(' '); // node src/cli/main.ts
  assert.equal(d.cmd.at(-1), 'serve');
  const commands = section.match(/```sh\n[\s\S]*?```/g)!.join('\n');
  const service = /^services:\n {2}([a-z0-9-]+):/m.exec(compose)![1];
  assert.ok(commands.includes('docker compose up -d --build'));
  assert.ok(commands.includes(`docker compose exec ${service} ${program} admin-key`));
  assert.ok(commands.includes('docker build -t citygate .'));
  assert.ok(commands.includes(`-p ${d.expose}:${d.expose}`));
  assert.ok(commands.includes(`-v citygate-data:${d.volume[0]}`));
  assert.ok(commands.includes(`docker exec citygate ${program} admin-key`));
  assert.ok(compose.includes(`# docker compose up -d   — then: docker compose exec ${service} ${program} admin-key`));
  // compose.yaml agrees with the image and takes the text provider key from the environment.
  for (const k of ['HOST', 'PORT', 'LOCAL_LOGIN', 'DATABASE_PATH']) {
    const m = new RegExp(`^\\s+${k}: "?([^"\\n]+)"?$`, 'm').exec(compose);
    assert.equal(m?.[1], d.env[k], `compose.yaml ${k}`);
  }
  assert.match(compose, /^\s+TEXTPROVIDER_API_KEY: \$\{TEXTPROVIDER_API_KEY:-\}$/m);
  assert.match(compose, new RegExp(`"${d.expose}:${d.expose}"`));
  assert.match(compose, new RegExp(`citygate-data:${d.volume[0]}`));
  assert.match(compose, /^\s+build: \.$/m);
});

test('the image’s command serves with the image’s settings (login off, health on)', async () => {
  const d = parseDockerfile();
  const dir = tempDir('citygate-image-');
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, ...d.env, HOST: '127.0.0.1', PORT: '0', DATABASE_PATH: join(dir, 'data/citygate.sqlite') };
  // The image's `node` is Node 24; here it is the pinned one.
  const cmd = [process.execPath, ...d.cmd.slice(1)];
  const run = await runUntil(cmd, ROOT, env, /listening on (http:\/\/\S+)/, 20_000);
  try {
    const url = run.match[1];
    assert.equal((await (await fetch(`${url}/health`)).json()).ok, true);
    const login = await fetch(`${url}/v1/accounts/login`, { method: 'POST', body: '{"city_id":"x"}' });
    assert.equal(login.status, 403, 'LOCAL_LOGIN=false');
    assert.equal((await login.json()).error.code, 'local_login_disabled');
    const key = execFileSync(process.execPath, [...d.cmd.slice(1, -1), 'admin-key'], { cwd: ROOT, env, encoding: 'utf8' }).trim();
    assert.match(key, /^cg_admin_/);
  } finally {
    assert.equal(await run.stop(), 0);
  }
});

test('the README links every docs/*.md and names every provider slot', () => {
  for (const f of ['docs/ai.md', 'docs/accounts.md', 'docs/money.md', 'docs/edge.md']) assert.ok(readme.includes(`](${f})`), f);
  for (const [slot, name] of [
    ['TEXTPROVIDER_API_KEY', 'OpenAI-compatible'],
    ['OAUTH_A_CLIENT_ID', 'GitHub'],
    ['OAUTH_B_CLIENT_ID', 'Google'],
    ['PAYMENT_A_SECRET_KEY', 'Stripe'],
    ['PAYMENT_B_API_KEY', 'Creem'],
  ]) {
    const row = readme.split('\n').find((l) => l.startsWith('|') && l.includes(`\`${slot}\``));
    assert.ok(row?.includes(name), `${slot} → ${name}`);
  }
});

test('the README’s configuration table has every key the code reads', () => {
  const src = execFileSync('sh', ['-c', `cat $(git -C "${ROOT}" ls-files 'src/*.ts')`], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
  const keys = new Set<string>();
  for (const m of src.matchAll(/(?:env\.(?:get|has|source)\(|apiKeyEnv: |baseUrlEnv: |key: )'([A-Z][A-Z0-9_]+)'/g)) keys.add(m[1]);
  for (const m of src.matchAll(/\b(?:env|processEnv)\.([A-Z][A-Z0-9_]{3,})\b/g)) keys.add(m[1]);
  for (const k of ['PATH', 'APPDATA', 'XDG_CONFIG_HOME', 'CLOUDFLARE_ACCOUNT_ID']) keys.delete(k); // the platform's, not citygate's
  assert.ok(keys.size > 35, `found only ${keys.size} keys`);
  const missing = [...keys].filter((k) => !readme.includes(k));
  assert.deepEqual(missing, [], 'keys the README does not mention');
});
