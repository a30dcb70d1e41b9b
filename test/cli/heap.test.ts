// `citygate serve` runs with a young generation sized for a gateway (src/cli/heap.ts): it
// re-executes itself with --max-semi-space-size=8, --no-allocation-site-pretenuring, MALLOC_ARENA_MAX=2 and a compile cache — the same process,
// which still answers and stops gracefully — unless the operator gave a value of their own or
// CITYGATE_HEAP_TUNING=0.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../helpers/gateway.ts';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');
const linux = process.platform === 'linux';

/** Starts `serve`, returns its node flags as the OS sees them (/proc/<pid>/cmdline), then stops it with SIGTERM. */
async function serveFlags(env: Record<string, string>, nodeArgs: string[] = []): Promise<{ flags: string[]; environ: string[]; health: number; exitCode: number | null }> {
  const dir = tempDir('citygate-heap-');
  const child = spawn(process.execPath, [...nodeArgs, MAIN, 'serve'], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, HOST: '127.0.0.1', PORT: '0', DATABASE_PATH: join(dir, 'citygate.sqlite'), ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    const url = await new Promise<string>((res, rej) => {
      // as generous as the gateway helper's: a boot without the compile cache on a loaded
      // two-core machine (CI beside other work) took over 30 s once
      const timer = setTimeout(() => rej(new Error(`serve did not start in 90 s:\n${err}`)), 90_000);
      child.stderr!.on('data', () => {
        const m = /citygate listening on (http:\/\/\S+)/.exec(err);
        if (m) (clearTimeout(timer), res(m[1]));
      });
      child.once('exit', (code) => rej(new Error(`serve exited (${code}):\n${err}`)));
    });
    const health = (await fetch(`${url}/health`)).status;
    // The pid we spawned: a re-execution keeps it, so process managers and signals still work.
    const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
    const flags = argv.slice(1, argv.indexOf(MAIN));
    const environ = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0');
    child.kill('SIGTERM');
    return { flags, environ, health, exitCode: await exited };
  } finally {
    child.kill('SIGKILL');
  }
}

test('serve runs with a bounded young generation, in the process that was started, and stops gracefully', { skip: !linux && '/proc is Linux-only' }, async () => {
  const r = await serveFlags({});
  assert.equal(r.health, 200);
  assert.ok(r.flags.includes('--max-semi-space-size=8'), `node flags: ${JSON.stringify(r.flags)}`);
  assert.ok(r.flags.includes('--no-allocation-site-pretenuring'), `node flags: ${JSON.stringify(r.flags)}`);
  assert.ok(r.environ.includes('MALLOC_ARENA_MAX=2'));
  assert.equal(r.exitCode, 0);
});

test("an operator's own pretenuring choice (on the node command line) wins: only the young generation is sized", { skip: !linux && '/proc is Linux-only' }, async () => {
  const r = await serveFlags({}, ['--allocation-site-pretenuring']);
  assert.equal(r.health, 200);
  assert.deepEqual(r.flags, ['--max-semi-space-size=8', '--allocation-site-pretenuring']);
  assert.equal(r.exitCode, 0);
});

test('serve keeps a compile cache, so later boots skip the TypeScript stripper', { skip: !linux && '/proc is Linux-only' }, async () => {
  const tmp = tempDir('citygate-heap-tmp-');
  const r = await serveFlags({ TMPDIR: tmp });
  assert.ok(r.environ.includes(`NODE_COMPILE_CACHE=${join(tmp, 'node-compile-cache')}`));
  // written once serve listens, not only at a graceful exit
  assert.ok(readdirSync(join(tmp, 'node-compile-cache'), { recursive: true }).length > 0);
  assert.equal(r.exitCode, 0);
});

test("an operator's own --max-semi-space-size (NODE_OPTIONS) wins: no re-execution", { skip: !linux && '/proc is Linux-only' }, async () => {
  const r = await serveFlags({ NODE_OPTIONS: '--max-semi-space-size=32' });
  assert.equal(r.health, 200);
  assert.deepEqual(r.flags, []);
});

test('CITYGATE_HEAP_TUNING=0 leaves the heap to V8', { skip: !linux && '/proc is Linux-only' }, async () => {
  const r = await serveFlags({ CITYGATE_HEAP_TUNING: '0' });
  assert.equal(r.health, 200);
  assert.deepEqual(r.flags, []);
  assert.ok(!r.environ.some((e) => e.startsWith('MALLOC_ARENA_MAX=')));
  assert.equal(r.exitCode, 0);
});
