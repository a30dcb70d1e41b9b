// Starts a real citygate server (`node src/cli/main.ts serve`) as a child process on an
// ephemeral port with its own temporary database, the way an operator runs it: a SQLite file,
// or a fresh PostgreSQL database when the suite runs on PostgreSQL (CITYGATE_TEST_DIALECT) or
// the test asks for one. Gateways started on one `dir` share one database either way.
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createTestDatabase, ON_POSTGRES } from './postgres.ts';
import { sqlGet, type SqlTarget } from './sql.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const MAIN = join(ROOT, 'src/cli/main.ts');

/** The env var naming npm test's bundle of the gateway (test/helpers/serve-bundle.ts), if any. */
export const SERVE_BUNDLE_ENV = 'CITYGATE_TEST_SERVE_ENTRY';

/**
 * What a test gateway runs: npm test's bundle of the sources when there is one (half the boot's
 * CPU, test/helpers/serve-bundle.ts), else the sources. A process watched by an --import hook
 * (the lists of modules a boot loads) runs the sources, which those lists name. The bundle's
 * compile cache lives and goes with it: each run's bundle is new, and in npm test's cache its
 * entries (~3 MB a run) would pile up, since Node never removes one.
 */
function entryFor(env: Record<string, string | undefined>): { main: string; compileCache: string | undefined } {
  const bundle = process.env[SERVE_BUNDLE_ENV];
  if (!bundle || env.NODE_OPTIONS?.includes('--import')) return { main: MAIN, compileCache: process.env.NODE_COMPILE_CACHE };
  return { main: bundle, compileCache: join(dirname(bundle), '.compile-cache') };
}

/** The SQLite file with every migration applied that npm test's global setup made, if any (test/helpers/global-setup.ts). */
export const SQLITE_TEMPLATE_ENV = 'CITYGATE_TEST_SQLITE_TEMPLATE';

/** The one master key of the tests' gateways on PostgreSQL (`openssl rand -hex 32`, made once). */
export const TEST_MASTER_KEY = '5f1c0a3e9b7d2468ace013579bdf2468a1c3e5f7092b4d6f8e0c2a4b6d8f0e1c';

export interface TestGateway {
  url: string;
  dir: string;
  dbPath: string;
  /** The PostgreSQL database when the gateway runs on one, else null (the SQLite file at dbPath). */
  databaseUrl: string | null;
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
  /** Run on a PostgreSQL database (default: when the suite runs on PostgreSQL). */
  postgres?: boolean;
  /** A new empty database that the first boot migrates, not a copy of the migrated template (for
   *  tests of first boots; the default copies it, SQLite file or PostgreSQL database, when npm
   *  test made one). */
  freshDatabase?: boolean;
  /** Sees the process as soon as it is spawned (before it listens). */
  onSpawn?: (child: ChildProcess) => void;
}

/** One PostgreSQL database per gateway directory, so gateways started on one dir share it. */
const pgByDir = new Map<string, Promise<string>>();
function postgresFor(dir: string, fresh: boolean): Promise<string> {
  let url = pgByDir.get(dir);
  if (!url) pgByDir.set(dir, (url = createTestDatabase({ migrated: !fresh }).then((d) => d.url)));
  return url;
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
  const onPostgres = !opts.env?.DATABASE_URL && (opts.postgres ?? ON_POSTGRES);
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_PATH: dbPath,
    ...(onPostgres ? { DATABASE_URL: await postgresFor(dir, opts.freshDatabase ?? false) } : {}),
    // On PostgreSQL the master key must be given, the same on every replica (README, Scaling out).
    // Pools of 4, not the default 10: two copies of the suite on one server passed its 100
    // connections with 10 ("too many clients": a test timed out, another hung), and no test's
    // load needs more than a few at once.
    ...(onPostgres || opts.env?.DATABASE_URL ? { CITYGATE_MASTER_KEY: TEST_MASTER_KEY, DATABASE_POOL_SIZE: '4' } : {}),
    // Tests make many guest calls from one address; rate-limit tests set their own limit.
    RATE_LIMIT_GUEST_RPM: '0',
    ...opts.env,
  };
  const entry = entryFor(env);
  // npm test's cache of type-stripped sources (a gateway's boot skips Node's TypeScript stripper), or the bundle's own
  if (env.NODE_COMPILE_CACHE === undefined) env.NODE_COMPILE_CACHE = entry.compileCache;
  const databaseUrl = env.DATABASE_URL || null;
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  // A new SQLite database starts as a copy of the migrated template (its first boot then only
  // finds every migration applied); a file already there (a restart, a test's own) is left alone.
  const sqliteTemplate = process.env[SQLITE_TEMPLATE_ENV];
  if (sqliteTemplate && !databaseUrl && env.DATABASE_PATH === dbPath && !opts.freshDatabase && !existsSync(dbPath)) copyFileSync(sqliteTemplate, dbPath);
  const child = spawn(process.execPath, [entry.main, 'serve'], { cwd: dir, env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  opts.onSpawn?.(child);
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

  const adminKey = await readAdminKey({ dbPath, databaseUrl });
  const gw: TestGateway = {
    url,
    dir,
    dbPath,
    databaseUrl,
    adminKey,
    child,
    stdout: () => out,
    stderr: () => err,
    stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
      return new Promise((r) => {
        // a gateway stops itself within 15-20 s; a test never waits forever on one
        const kill = setTimeout(() => child.kill('SIGKILL'), 40_000);
        child.once('exit', (code) => {
          clearTimeout(kill);
          r(code);
        });
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

/** The admin key as an operator reads it: a plain SQL select on the database. */
export async function readAdminKey(db: SqlTarget | string): Promise<string> {
  const t = typeof db === 'string' ? { dbPath: db } : db;
  const row = await sqlGet<{ value: string }>(t, `SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`);
  if (!row) throw new Error('no admin key in the database');
  return row.value;
}

/** Starts several gateways at once; if one fails to start, stops the others before throwing. */
export async function startGateways(n: number, opts: StartOptions = {}): Promise<TestGateway[]> {
  const started = await Promise.allSettled(Array.from({ length: n }, () => startGateway(opts)));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    await Promise.all(started.map((r) => (r.status === 'fulfilled' ? r.value.stop() : null)));
    throw (failed as PromiseRejectedResult).reason;
  }
  return started.map((r) => (r as PromiseFulfilledResult<TestGateway>).value);
}
