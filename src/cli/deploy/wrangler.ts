// Running wrangler: found in the project's node_modules, else on PATH; every call of one
// deploy gets the same environment (CLOUDFLARE_ACCOUNT_ID when --account-id is given, which
// is how wrangler takes an account for commands that have no --account-id flag).
import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout and stderr as they interleaved. */
  output: string;
}

export interface Wrangler {
  bin: string;
  /** `input` goes to wrangler's stdin (secrets: never on the command line). */
  run(args: string[], opts?: { timeoutMs?: number; input?: string }): Promise<RunResult>;
}

function executable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function findWrangler(projectDir: string, env: NodeJS.ProcessEnv = process.env): string | null {
  const names = process.platform === 'win32' ? ['wrangler.cmd', 'wrangler.exe', 'wrangler'] : ['wrangler'];
  const local = names.map((n) => join(projectDir, 'node_modules', '.bin', n)).find((p) => existsSync(p));
  if (local) return local;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    for (const n of names) if (executable(join(dir, n))) return join(dir, n);
  }
  return null;
}

export function runProcess(
  cmd: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number; input?: string },
): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], shell: process.platform === 'win32' });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
    let stdout = '';
    let stderr = '';
    let output = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => ((stdout += d), (output += d)));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => ((stderr += d), (output += d)));
    const timer = setTimeout(() => {
      output += `\n(stopped after ${Math.round((opts.timeoutMs ?? 0) / 1000)} s)`;
      child.kill('SIGTERM');
    }, opts.timeoutMs ?? 600_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: 127, stdout, stderr: stderr + String(e), output: output + String(e) });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr, output });
    });
  });
}

/** The environment for wrangler and the project's scripts: the same Node first on PATH. */
export function toolEnv(accountId: string | undefined, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base, PATH: [dirname(process.execPath), base.PATH ?? ''].join(delimiter) };
  if (accountId) env.CLOUDFLARE_ACCOUNT_ID = accountId;
  // Deploys are non-interactive: never wait for a prompt.
  env.CI ??= 'true';
  return env;
}

export function wrangler(bin: string, cwd: string, env: NodeJS.ProcessEnv): Wrangler {
  return { bin, run: (args, o) => runProcess(bin, args, { cwd, env, timeoutMs: o?.timeoutMs ?? 300_000, input: o?.input }) };
}

// ---- output parsers (wrangler 4) ------------------------------------------------------

/** JSON printed by a `--json` command (tolerates banner lines before it). */
export function parseJsonOutput<T>(stdout: string): T | null {
  const t = stdout.trim();
  for (const start of [0, t.search(/^[[{]/m)]) {
    if (start < 0) continue;
    try {
      return JSON.parse(t.slice(start)) as T;
    } catch {
      /* try the next start */
    }
  }
  return null;
}

export interface WhoAmI {
  loggedIn: boolean;
  email?: string;
  accounts?: { name: string; id: string }[];
}

/** `wrangler d1 create` prints the new database's config snippet (JSON or TOML). */
export function parseD1CreateId(output: string): string | null {
  return /database_id"?\s*[:=]\s*"([0-9a-f-]{36})"/i.exec(output)?.[1] ?? null;
}

/** `wrangler queues list` prints a table with the queue names in a column. */
export function queueListed(output: string, name: string): boolean {
  return output.split('\n').some((line) => line.split(/[│|]/).some((cell) => cell.trim() === name));
}

/** `wrangler r2 bucket list` prints `name: <bucket>` blocks. */
export function bucketListed(output: string, name: string): boolean {
  return output.split('\n').some((line) => new RegExp(`^\\s*name:\\s+${name.replace(/[-]/g, '\\-')}\\s*$`).test(line));
}

/** The URL `wrangler deploy` reports: the lines after "Deployed <name> triggers". */
export function parseDeployUrl(output: string): string | null {
  const lines = output.split('\n');
  const at = lines.findIndex((l) => /Deployed .* triggers/.test(l));
  const after = at >= 0 ? lines.slice(at + 1) : lines;
  for (const l of after) {
    const m = /^\s*(https?:\/\/\S+)\s*$/.exec(l);
    if (m) return m[1].replace(/\/+$/, '');
  }
  return /(https:\/\/[a-z0-9.-]+\.workers\.dev)/i.exec(output)?.[1] ?? null;
}

export const alreadyExists = (output: string) => /already exists|already taken|already in use|\[code: 10033\]|\[code: 11009\]/i.test(output);
