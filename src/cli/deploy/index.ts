// citygate deploy [dir] [--dry-run] [--verify-only] [--verify] [--account-id ID]
// The seed's steps, in the seed's order: declaration, login, version, build, typecheck,
// resources, deploy, register, verify.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from '../args.ts';
import { findGateway, loadConfig, registerGateway, type RegisteredGateway } from '../config.ts';
import { CliError } from '../output.ts';
import { readDeclaration, type Declaration } from './declaration.ts';
import { HEALTH_FIX, waitForHealth } from './health.ts';
import { DeployFailed, StepError, stepRunner, type Outcome } from './steps.ts';
import { bumpPatch, readPackage, writeVersion, type PackageFile } from './version.ts';
import {
  alreadyExists,
  bucketListed,
  findWrangler,
  parseD1CreateId,
  parseDeployUrl,
  parseJsonOutput,
  queueListed,
  runProcess,
  toolEnv,
  wrangler as makeWrangler,
  type WhoAmI,
  type Wrangler,
} from './wrangler.ts';
import { consoleAssetsDir, wranglerConfig, writeTempConfig, type TempConfig } from './wrangler-config.ts';
import { generateMasterKey } from '../../kernel/secrets.ts';

const USAGE = 'citygate deploy [dir] [--dry-run] [--verify-only] [--verify] [--account-id ID]';
const ADMIN_KEY_SQL = `SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`;
const REMOTE = /^([a-z][a-z0-9+.-]*:\/\/|git@|[\w.-]+@[\w.-]+:)/i;

function verifyTimeoutMs(): number {
  const v = Number(process.env.CITYGATE_VERIFY_TIMEOUT_MS);
  return Number.isFinite(v) && v > 0 ? v : 60_000;
}

function projectDir(arg: string | undefined): string {
  const given = arg ?? '.';
  if (REMOTE.test(given)) {
    throw new CliError(
      `'${given}' is a remote address: citygate deploys only local project directories. Clone it first (git clone ${given}) and run \`citygate deploy <dir>\`.`,
    );
  }
  const dir = resolve(given);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new CliError(`no project directory at ${dir}; create one with \`citygate init ${given} --target edge\``);
  }
  return dir;
}

/** The gateway registered for this project (by its declared name), else the current one. */
function registeredFor(dir: string): RegisteredGateway | null {
  const config = loadConfig();
  try {
    const name = JSON.parse(readFileSync(join(dir, 'city.json'), 'utf8'))?.name;
    if (typeof name === 'string' && config.gateways[name]) return config.gateways[name];
  } catch {
    /* no readable declaration: fall back to the current gateway */
  }
  return config.current ? (findGateway(config, config.current) ?? null) : null;
}

function packageManager(dir: string): string {
  if (existsSync(join(dir, 'pnpm-lock.yaml'))) return 'pnpm';
  if (existsSync(join(dir, 'yarn.lock'))) return 'yarn';
  if (existsSync(join(dir, 'bun.lockb')) || existsSync(join(dir, 'bun.lock'))) return 'bun';
  return 'npm';
}

export async function deployCommand(args: string[]): Promise<number> {
  const { values, positionals } = parse(
    args,
    { 'dry-run': { type: 'boolean' }, 'verify-only': { type: 'boolean' }, verify: { type: 'boolean' }, 'account-id': { type: 'string' } },
    USAGE,
  );
  if (positionals.length > 1) throw new CliError(`one project directory at most\n\nusage: ${USAGE}`);
  const dryRun = !!values['dry-run'];
  const verifyOnly = !!values['verify-only'];
  if (dryRun && verifyOnly) throw new CliError('--dry-run and --verify-only exclude each other; pick one');
  const accountId = values['account-id'] as string | undefined;
  if (accountId !== undefined && !/^[0-9a-f]{32}$/i.test(accountId) && !/^[\w-]{1,64}$/.test(accountId)) {
    throw new CliError('--account-id takes the 32-character Cloudflare account id (see `wrangler whoami`)');
  }
  const dir = projectDir(positionals[0]);
  const write = (s: string) => void process.stdout.write(s);
  const step = stepRunner(write, (s) => void process.stderr.write(s));
  const timeoutMs = verifyTimeoutMs();

  try {
    if (verifyOnly) {
      await step('verify', async () => {
        const g = registeredFor(dir);
        if (!g) throw new StepError('no gateway is registered for this project', { fix: 'deploy it first with `citygate deploy`' });
        return verify(g.url, timeoutMs);
      });
      return 0;
    }
    await deploy({ dir, dryRun, verify: !!values.verify, accountId, step, timeoutMs, write });
    return 0;
  } catch (e) {
    if (e instanceof DeployFailed) {
      process.stderr.write(`citygate deploy: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}

async function verify(url: string, timeoutMs: number): Promise<Outcome> {
  const r = await waitForHealth(url, timeoutMs);
  if (!r.ok) throw new StepError(`${url}/health did not answer ok within ${Math.round(timeoutMs / 1000)} s (${r.error})`, { fix: HEALTH_FIX });
  return { done: `${url}/health ok (services: ${r.health.services.join(', ')})` };
}

interface DeployOptions {
  dir: string;
  dryRun: boolean;
  verify: boolean;
  accountId?: string;
  step: ReturnType<typeof stepRunner>;
  timeoutMs: number;
  write: (s: string) => void;
}

async function deploy(o: DeployOptions): Promise<void> {
  const { dir, dryRun, step } = o;
  const env = toolEnv(o.accountId);
  let decl!: Declaration;
  let w!: Wrangler;
  let pkg = null as PackageFile | null;
  let newVersion: string | undefined;
  let databaseId: string | null = null;
  let temp = null as TempConfig | null;
  let url = null as string | null;
  let restoreVersion = false;

  await step('declaration', () => {
    try {
      decl = readDeclaration(dir);
    } catch (e) {
      throw new StepError((e as Error).message, { fix: 'edit city.json (see docs/edge.md, "city.json reference") and run the deploy again' });
    }
    if (decl.target !== 'cloudflare-workers') {
      throw new StepError(`target is "${decl.target}": citygate deploy deploys "cloudflare-workers" projects`, {
        fix: 'run a node project with `npm start` (or its container); for the edge set "target": "cloudflare-workers"',
      });
    }
    pkg = readPackage(dir);
    return { done: `city.json: ${decl.name} → ${decl.target} (entry ${decl.entry})` };
  });

  await step('login', async () => {
    const bin = findWrangler(dir);
    if (!bin) {
      throw new StepError('wrangler was not found in the project (node_modules/.bin) nor on PATH', {
        fix: 'install it in the project: npm install --save-dev wrangler',
      });
    }
    w = makeWrangler(bin, dir, env);
    const r = await w.run(['whoami', '--json'], { timeoutMs: 60_000 });
    const who = parseJsonOutput<WhoAmI>(r.stdout);
    if (!who?.loggedIn) {
      if (who || /not authenticated|not logged in/i.test(r.output)) {
        throw new StepError('not logged in to Cloudflare', { output: r.output, fix: 'run `npx wrangler login`, or set CLOUDFLARE_API_TOKEN' });
      }
      throw new StepError(`\`wrangler whoami\` failed (exit ${r.code})`, { output: r.output, fix: 'check that wrangler runs: npx wrangler --version' });
    }
    const accounts = who.accounts ?? [];
    if (o.accountId && accounts.length && !accounts.some((a) => a.id === o.accountId)) {
      throw new StepError(`account ${o.accountId} is not one of this login's accounts (${accounts.map((a) => a.id).join(', ')})`, {
        fix: 'pass one of the account ids `wrangler whoami` lists',
      });
    }
    if (!o.accountId && accounts.length > 1) {
      throw new StepError(`this login has ${accounts.length} accounts and none was chosen`, {
        output: accounts.map((a) => `${a.id}  ${a.name}`).join('\n'),
        fix: 'pass --account-id ID (or set CLOUDFLARE_ACCOUNT_ID)',
      });
    }
    const account = o.accountId ?? accounts[0]?.id;
    return { done: `${who.email ?? 'logged in'}${account ? ` (account ${account})` : ''}` };
  });

  try {
    await step('version', () => {
      if (!pkg) return { skipped: 'no package.json' };
      const current = pkg.json.version ?? '0.0.0';
      let next: string;
      try {
        next = bumpPatch(current);
      } catch (e) {
        throw new StepError((e as Error).message, { fix: 'set "version": "0.1.0" in package.json' });
      }
      if (dryRun) return { skipped: `dry run: stays ${current} (a deploy makes it ${next})` };
      writeVersion(pkg, next);
      restoreVersion = true;
      newVersion = next;
      return { done: `${current} → ${next}` };
    });

    for (const script of ['build', 'typecheck'] as const) {
      await step(script, async () => {
        if (!pkg?.json.scripts?.[script]) return { skipped: `no "${script}" script in package.json` };
        const pm = packageManager(dir);
        const r = await runProcess(pm, ['run', script], { cwd: dir, env, timeoutMs: 600_000 });
        if (r.code !== 0) {
          const missing = r.code === 127 || /command not found|: not found|is not recognized/i.test(r.output);
          throw new StepError(`\`${pm} run ${script}\` exited with ${r.code}`, {
            output: r.output,
            fix: missing ? `install the project's dependencies (${pm} install), then deploy again` : `fix the ${script} errors above, then deploy again`,
          });
        }
        return { done: `${pm} run ${script}` };
      });
    }

    await step('resources', async () => {
      const parts: string[] = [];
      const { database, queue, storage } = decl.resources;
      const fail = (what: string, r: { code: number; output: string }) =>
        new StepError(`${what} failed (exit ${r.code})`, { output: r.output, fix: 'check the wrangler output above; `wrangler whoami` shows the account in use' });

      // D1
      const list = await w.run(['d1', 'list', '--json']);
      if (list.code !== 0) throw fail('`wrangler d1 list`', list);
      const dbs = parseJsonOutput<{ uuid: string; name: string }[]>(list.stdout) ?? [];
      databaseId = dbs.find((d) => d.name === database.name)?.uuid ?? null;
      if (databaseId) parts.push(`database ${database.name} (found)`);
      else if (dryRun) parts.push(`database ${database.name} (pending: dry run)`);
      else {
        const c = await w.run(['d1', 'create', database.name]);
        if (c.code !== 0 && !alreadyExists(c.output)) throw fail(`\`wrangler d1 create ${database.name}\``, c);
        databaseId = parseD1CreateId(c.output);
        if (!databaseId) {
          const again = await w.run(['d1', 'list', '--json']);
          databaseId = parseJsonOutput<{ uuid: string; name: string }[]>(again.stdout)?.find((d) => d.name === database.name)?.uuid ?? null;
        }
        if (!databaseId) throw new StepError(`created ${database.name} but could not read its id`, { output: c.output, fix: 'run the deploy again' });
        parts.push(`database ${database.name} (created)`);
      }

      // Queue
      const ql = await w.run(['queues', 'list']);
      if (ql.code !== 0) throw fail('`wrangler queues list`', ql);
      if (queueListed(ql.stdout, queue.name)) parts.push(`queue ${queue.name} (found)`);
      else if (dryRun) parts.push(`queue ${queue.name} (pending: dry run)`);
      else {
        const c = await w.run(['queues', 'create', queue.name]);
        if (c.code !== 0 && !alreadyExists(c.output)) throw fail(`\`wrangler queues create ${queue.name}\``, c);
        parts.push(`queue ${queue.name} (created)`);
      }

      // R2, only when declared
      if (storage) {
        const bl = await w.run(['r2', 'bucket', 'list']);
        if (bl.code !== 0) throw fail('`wrangler r2 bucket list`', bl);
        if (bucketListed(bl.stdout, storage.name)) parts.push(`storage ${storage.name} (found)`);
        else if (dryRun) parts.push(`storage ${storage.name} (pending: dry run)`);
        else {
          const c = await w.run(['r2', 'bucket', 'create', storage.name]);
          if (c.code !== 0 && !alreadyExists(c.output)) throw fail(`\`wrangler r2 bucket create ${storage.name}\``, c);
          parts.push(`storage ${storage.name} (created)`);
        }
      } else parts.push('storage: none declared');
      return { done: parts.join(', ') };
    });

    temp = writeTempConfig(dir, wranglerConfig(decl, { databaseId }, { accountId: o.accountId, version: newVersion ?? pkg?.json.version, consoleDir: consoleAssetsDir() }));

    await step('deploy', async () => {
      if (dryRun) {
        const outdir = mkdtempSync(join(tmpdir(), 'citygate-dry-run-'));
        try {
          const r = await w.run(['deploy', '--config', temp!.path, '--dry-run', '--outdir', outdir]);
          if (r.code !== 0) throw new StepError('`wrangler deploy --dry-run` failed', { output: r.output, fix: 'fix the build errors above (the entry must bundle for Workers)' });
        } finally {
          rmSync(outdir, { recursive: true, force: true });
        }
        return { done: 'bundled with a temporary config; nothing uploaded (dry run)' };
      }
      const r = await w.run(['deploy', '--config', temp!.path, '--keep-vars']);
      if (r.code !== 0) throw new StepError('`wrangler deploy` failed', { output: r.output, fix: 'fix the error above and deploy again' });
      url = parseDeployUrl(r.output);
      if (!url) {
        throw new StepError('wrangler deployed but reported no URL', {
          output: r.output,
          fix: 'enable the workers.dev subdomain in the Cloudflare dashboard (Workers → your subdomain), or bind a route, then deploy again',
        });
      }
      restoreVersion = false; // deployed: the bump stays
      const secret = await ensureMasterKey(w, temp!.path, o.write);
      return { done: `${decl.name} → ${url}${secret}` };
    });

    await step('register', async () => {
      if (dryRun) return { skipped: 'dry run' };
      // The first /health initializes the gateway (tables, admin key, signing key).
      const init = await waitForHealth(url!, o.timeoutMs);
      const r = await w.run(['d1', 'execute', decl.resources.database.name, '--remote', '--json', '--yes', '--config', temp!.path, '--command', ADMIN_KEY_SQL]);
      const rows = parseJsonOutput<{ results?: { value?: string }[] }[]>(r.stdout);
      const adminKey = r.code === 0 ? (rows?.[0]?.results?.[0]?.value ?? null) : null;
      registerGateway({ name: decl.name, url: url!, admin_key: adminKey, target: decl.target, project_dir: dir });
      if (!adminKey) {
        const why = init.ok ? 'the admin key could not be read from D1' : `/health did not answer yet (${init.error})`;
        return { done: `${decl.name} → ${url} is the current gateway, without its admin key: ${why}; once /health answers, run \`citygate deploy --verify-only\` and \`citygate gateways add ${url} --name ${decl.name} --admin-key KEY\`` };
      }
      return { done: `${decl.name} → ${url} is the current gateway (admin key stored in the CLI config)` };
    });
  } finally {
    temp?.remove();
    if (restoreVersion && pkg) {
      writeFileSync(pkg.path, pkg.text);
      o.write(`  (package.json version restored to ${pkg.json.version})\n`);
    }
  }

  await step('verify', () => {
    if (dryRun) return { skipped: 'dry run' };
    if (!o.verify) return { skipped: 'pass --verify to check /health' };
    return verify(url!, o.timeoutMs);
  });
}

/**
 * Secrets at rest on the edge: the Worker secret CITYGATE_MASTER_KEY, set once. A Worker that
 * has it keeps it (a new key would refuse the database's sealed secrets); a Worker without it
 * gets a fresh one, shown once so the operator can keep it apart from the database.
 */
async function ensureMasterKey(w: Wrangler, config: string, write: (s: string) => void): Promise<string> {
  const list = await w.run(['secret', 'list', '--config', config, '--format', 'json']);
  const names = list.code === 0 ? (parseJsonOutput<{ name: string }[]>(list.stdout) ?? null) : null;
  if (!names) throw new StepError('`wrangler secret list` failed', { output: list.output, fix: 'check the wrangler output above and deploy again' });
  if (names.some((s) => s.name === 'CITYGATE_MASTER_KEY')) return '';
  const key = generateMasterKey();
  const put = await w.run(['secret', 'put', 'CITYGATE_MASTER_KEY', '--config', config], { input: key });
  if (put.code !== 0) throw new StepError('`wrangler secret put CITYGATE_MASTER_KEY` failed', { output: put.output, fix: 'deploy again (the secret is set once, on the first deploy)' });
  write(`\n  generated the master key of secrets at rest (Worker secret CITYGATE_MASTER_KEY), shown once:\n\n    ${key}\n\n  keep it apart from the database: without it the sealed secrets are lost (docs/security.md)\n\n`);
  return ' (master key secret set)';
}
