// Starts a real citygate server (`node src/cli/main.ts serve`) as a child process on an
// ephemeral port with its own temporary database, the way an operator runs it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

const ROOT = resolve(import.meta.dirname, '../..');
const MAIN = join(ROOT, 'src/cli/main.ts');

export interface TestGateway {
  url: string;
  dir: string;
  dbPath: string;
  adminKey: string;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Graceful stop (SIGTERM); resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Stops and starts again on the same database (and env), on a new port. */
  restart(extraEnv?: Record<string, string>): Promise<TestGateway>;
}

export interface StartOptions {
  dir?: string;
  env?: Record<string, string | undefined>;
  /** Removes the temporary directory when the test process exits (default true). */
  cleanup?: boolean;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export function tempDir(prefix = 'citygate-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export async function startGateway(opts: StartOptions = {}): Promise<TestGateway> {
  const dir = opts.dir ?? tempDir();
  const dbPath = join(dir, 'citygate.sqlite');
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_PATH: dbPath,
    // Tests make many guest calls from one address; rate-limit tests set their own limit.
    RATE_LIMIT_GUEST_RPM: '0',
    ...opts.env,
  };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  const child = spawn(process.execPath, [MAIN, 'serve'], { cwd: dir, env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  child.once('exit', () => live.delete(child));
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));

  // A generous deadline (a loaded two-core machine boots several gateways at once), and a
  // gateway that missed it is killed: a child left running would keep the test file alive.
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gateway did not start in 90 s:\n${err}`));
    }, 90_000);
    const onData = () => {
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        child.stderr!.off('data', onData);
        resolveUrl(m[1]);
      }
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code} before listening:\n${err}`));
    });
  });

  const adminKey = readAdminKey(dbPath);
  const gw: TestGateway = {
    url,
    dir,
    dbPath,
    adminKey,
    child,
    stdout: () => out,
    stderr: () => err,
    stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
      return new Promise((r) => {
        child.once('exit', (code) => r(code));
        child.kill(signal);
      });
    },
    async restart(extraEnv = {}) {
      await gw.stop();
      return startGateway({ ...opts, dir, env: { ...opts.env, ...extraEnv } });
    },
  };
  return gw;
}

/** The admin key as an operator reads it: a plain SQL select on the database file. */
export function readAdminKey(dbPath: string): string {
  const db = new DatabaseSync(dbPath, { readOnly: true });
  try {
    const row = db.prepare(`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`).get() as { value: string };
    return row.value;
  } finally {
    db.close();
  }
}
