// A private PostgreSQL server for the tests that stop and start their database (a restart
// under load, a boot while it is down): the same server binaries as the shared local server
// (Debian's /usr/lib/postgresql/<version>/bin), a cluster of its own in a temporary directory
// on a free port, so stopping it never disturbs the shared server that other test files use.
// Run as the `postgres` user when the tests run as root (PostgreSQL refuses root). Removed at
// the end of the test process.
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PrivatePostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  port: number;
  /** A URL of another database on this server. */
  urlOf(db: string): string;
  createDatabase(name: string): void;
  /** Stops the server ("fast": sessions are ended as a restart or failover ends them). */
  stop(): void;
  start(): void;
  remove(): void;
}

function binDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin/pg_ctl'))).sort((a, b) => Number(b) - Number(a));
  return versions.length ? join(root, versions[0], 'bin') : null;
}

/** Why a private server cannot be made here (one line), or false. */
export function privatePgSkipReason(): string | false {
  if (!binDir()) return 'private PostgreSQL tests skipped: no server binaries in /usr/lib/postgresql/*/bin (apt-get install postgresql)';
  if (process.getuid?.() === 0 && spawnSync('id', ['postgres']).status !== 0) return 'private PostgreSQL tests skipped: running as root and there is no postgres user to run the server as';
  return false;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = binDir()!;
  const asRoot = process.getuid?.() === 0;
  const run = (cmd: string, args: string[]) => {
    const r = asRoot ? spawnSync('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args], { encoding: 'utf8' }) : spawnSync(join(bin, cmd), args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr || r.stdout}`);
    return r.stdout;
  };
  const dir = mkdtempSync(join(tmpdir(), 'citygate-pg-'));
  if (asRoot) {
    const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
    const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const log = join(dir, 'log');
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  let running = false;
  const startOn = (port: number) => {
    const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
    try {
      run('pg_ctl', ['-D', data, '-o', opts, '-l', log, '-w', '-t', '60', 'start']);
    } catch (e) {
      // pg_ctl says only "examine the log output": the reason is in the log
      const tail = existsSync(log) ? readFileSync(log, 'utf8').split('\n').slice(-8).join('\n') : '';
      throw Object.assign(new Error(`${(e as Error).message}\nserver log:\n${tail}`), { portTaken: /could not bind|already in use/i.test(tail) });
    }
    running = true;
  };
  // A free port can be taken between the probe and the server's bind, by any socket of a
  // loaded machine (an outgoing connection's local port too): the first start tries another.
  let port = await freePort();
  for (let attempt = 1; ; attempt++) {
    try {
      startOn(port);
      break;
    } catch (e) {
      if (!(e as { portTaken?: boolean }).portTaken || attempt === 3) {
        rmSync(dir, { recursive: true, force: true });
        throw e;
      }
      port = await freePort();
    }
  }
  const pg: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    urlOf: (db) => `postgres://postgres@127.0.0.1:${port}/${db}`,
    createDatabase(name) {
      const psql = join(bin, 'psql');
      const args = ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-c', `CREATE DATABASE "${name}"`];
      const r = existsSync(psql) ? spawnSync(psql, args, { encoding: 'utf8' }) : spawnSync('psql', args, { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`create database: ${r.stderr}`);
    },
    start() {
      startOn(port);
    },
    stop() {
      run('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
      running = false;
    },
    remove() {
      if (running) spawnSync(asRoot ? 'runuser' : join(bin, 'pg_ctl'), [...(asRoot ? ['-u', 'postgres', '--', join(bin, 'pg_ctl')] : []), '-D', data, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore' });
      running = false;
      rmSync(dir, { recursive: true, force: true });
    },
  };
  process.once('exit', () => pg.remove());
  return pg;
}
