// Runs the citygate command line as a user would (a child process), without blocking the
// test's event loop (Miniflare serves from this process too).
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';

const MAIN = join(resolve(import.meta.dirname, '../..'), 'src/cli/main.ts');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], opts: { env?: Record<string, string | undefined>; cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolveRun, reject) => {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...process.env, ...opts.env })) if (v !== undefined) env[k] = v;
    delete env.NODE_TEST_CONTEXT; // a child citygate is not part of the test run
    const child = spawn(process.execPath, [MAIN, ...args], { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolveRun({ code: code ?? 1, stdout, stderr }));
  });
}
