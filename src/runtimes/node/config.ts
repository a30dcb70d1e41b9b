// Node runtime settings (seed §1): HOST, PORT, DATABASE_PATH, LOCAL_LOGIN, GATEWAY_SERVICES;
// DATABASE_URL (PostgreSQL, takes precedence over DATABASE_PATH) with DATABASE_POOL_SIZE and
// DATABASE_STATEMENT_TIMEOUT_MS and DATABASE_CONNECT_TIMEOUT_S; GATEWAY_WORKERS (processes
// sharing the port); SHUTDOWN_TIMEOUT_MS (the drain on SIGTERM).
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';

export interface NodeConfig {
  host: string;
  port: number;
  databasePath: string;
  /** postgres://… when set: the database is PostgreSQL, not the SQLite file. */
  databaseUrl: string | null;
  poolSize: number;
  statementTimeoutMs: number;
  /** How long a SQLite statement waits for another process's write lock (SQLITE_BUSY_TIMEOUT_MS, default 10 000). */
  sqliteBusyTimeoutMs: number;
  localLogin: boolean;
  services: string | undefined;
  dataDir: string;
  workers: number;
  /** How long a job stays claimed by a runner that stopped renewing it (JOB_LEASE_SECONDS, default 60). */
  jobLeaseMs: number;
  /** How long boot waits for the database: PostgreSQL to accept connections, a locked SQLite file (DATABASE_CONNECT_TIMEOUT_S, default 60). */
  connectTimeoutS: number;
  /** How long a drain lets in-flight calls and streams finish (SHUTDOWN_TIMEOUT_MS, default 30 000). */
  shutdownTimeoutMs: number;
}

/** A whole-number setting within [min, max]; a bad value fails the boot with the key's name. */
export function intSetting(env: NodeJS.ProcessEnv, key: string, dflt: number, min: number, max: number): number {
  const raw = env[key];
  if (raw === undefined || raw === '') return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${key} must be an integer from ${min} to ${max}, got '${raw}'`);
  return n;
}

export function readNodeConfig(env: NodeJS.ProcessEnv = process.env): NodeConfig {
  const port = intSetting(env, 'PORT', 43127, 0, 65535);
  const databasePath = resolve(env.DATABASE_PATH || './data/citygate.sqlite');
  const host = env.HOST || '127.0.0.1';
  // Local login is a development feature: on by default only when nobody else can reach the
  // listener. LOCAL_LOGIN=true turns it on anywhere (with a warning at boot, see localLoginWarning).
  const localLogin = env.LOCAL_LOGIN ? !/^(false|0|no|off)$/i.test(env.LOCAL_LOGIN) : isLoopbackHost(host);
  const databaseUrl = env.DATABASE_URL || null;
  if (databaseUrl && !/^postgres(ql)?:\/\//i.test(databaseUrl)) {
    throw new Error(`DATABASE_URL must be a postgres:// or postgresql:// URL (for SQLite set DATABASE_PATH), got '${redactUrl(databaseUrl)}'`);
  }
  const workersRaw = env.GATEWAY_WORKERS ?? '';
  const workers = /^auto$/i.test(workersRaw) ? availableParallelism() : intSetting(env, 'GATEWAY_WORKERS', 1, 1, 256);
  return {
    host,
    port,
    databasePath,
    databaseUrl,
    poolSize: intSetting(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    statementTimeoutMs: intSetting(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 30_000, 0, 3_600_000),
    sqliteBusyTimeoutMs: intSetting(env, 'SQLITE_BUSY_TIMEOUT_MS', 10_000, 0, 600_000),
    localLogin,
    services: env.GATEWAY_SERVICES,
    dataDir: resolve(databasePath, '..'),
    workers,
    jobLeaseMs: intSetting(env, 'JOB_LEASE_SECONDS', 60, 1, 86_400) * 1000,
    connectTimeoutS: intSetting(env, 'DATABASE_CONNECT_TIMEOUT_S', 60, 0, 3600),
    shutdownTimeoutMs: intSetting(env, 'SHUTDOWN_TIMEOUT_MS', 30_000, 0, 3_600_000),
  };
}

/** Whether a listen address (HOST) is reachable from this machine only. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || /^::ffff:127\./.test(h);
}

/** The boot warning when local login is on for a listener others can reach (LOCAL_LOGIN=true), or null. */
export function localLoginWarning(c: NodeConfig): string | null {
  if (!c.localLogin || isLoopbackHost(c.host)) return null;
  return `citygate: LOCAL_LOGIN is on while listening on ${c.host}: anyone who reaches this port can sign in as any user without credentials. Set LOCAL_LOGIN=false unless this is a development machine.`;
}

/** A database URL without its password, for logs and errors. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ':***@');
  }
}

/** What the database is, for the log line at start: the file, or the URL without password. */
export function describeDatabase(c: Pick<NodeConfig, 'databaseUrl' | 'databasePath'>): string {
  return c.databaseUrl ? redactUrl(c.databaseUrl) : c.databasePath;
}
