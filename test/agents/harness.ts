// Shared by the test:agents files (test/agents/*.agents.ts): installing a pinned set of real
// clients into .agents-cache/, running one to its end, and temporary working directories.
// Each set of clients is a folder under test/agents/ with its own package.json and lock
// (clients/ holds the first set), so adding a client never rewrites another set's lock.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Where a set of clients is installed, and its bin folder. */
export function cacheOf(set: string): { dir: string; bin: string } {
  const dir = join(ROOT, '.agents-cache', set === 'clients' ? '' : set);
  return { dir, bin: join(dir, 'node_modules/.bin') };
}

/**
 * Installs the pinned clients of test/agents/<set>/ into their cache folder (npm ci from the
 * committed lock) unless that lock is installed already; `bins` must exist afterwards.
 */
export function installClients(set: string, bins: string[]): { dir: string; bin: string } {
  const from = join(ROOT, 'test/agents', set);
  const { dir, bin } = cacheOf(set);
  const lock = readFileSync(join(from, 'package-lock.json'));
  const stamp = createHash('sha256').update(lock).digest('hex');
  const stampFile = join(dir, '.installed');
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp && bins.every((b) => existsSync(join(bin, b)))) return { dir, bin };
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(from)) copyFileSync(join(from, f), join(dir, f));
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' });
  assert.equal(r.status, 0, `npm ci of the agent clients in test/agents/${set}`);
  writeFileSync(stampFile, stamp);
  return { dir, bin };
}

/** Runs a client to its end (at most `timeoutMs`, default 3 minutes), its output collected. */
export function run(
  cmd: string,
  args: string[],
  opts: { cwd: string; env: Record<string, string>; timeoutMs?: number },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: { PATH: process.env.PATH!, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 180_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Temporary working directories, removed by `removeWorkdirs()` (call it in `after`). */
const dirs: string[] = [];
export function workdir(): string {
  const d = mkdtempSync(join(tmpdir(), 'citygate-agent-'));
  dirs.push(d);
  return d;
}
export function removeWorkdirs(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

/**
 * Claude Code's environment for a run against a gateway: its home in `cwd`, no telemetry or
 * other traffic, skipping permissions allowed as root (IS_SANDBOX), the Messages API at
 * `<gateway>/v1/ai`, and the credential (`ANTHROPIC_AUTH_TOKEN` or `ANTHROPIC_API_KEY`).
 */
export function claudeEnv(cwd: string, gatewayUrl: string, credential: { ANTHROPIC_AUTH_TOKEN: string } | { ANTHROPIC_API_KEY: string }): Record<string, string> {
  return { HOME: cwd, IS_SANDBOX: '1', DISABLE_TELEMETRY: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', ANTHROPIC_BASE_URL: `${gatewayUrl}/v1/ai`, ...credential };
}
