// Node runtime settings (seed §1): HOST, PORT, DATABASE_PATH, LOCAL_LOGIN, GATEWAY_SERVICES,
// and JOB_LEASE_MS (how long a crashed process's running job stays claimed).
import { resolve } from 'node:path';

export interface NodeConfig {
  host: string;
  port: number;
  databasePath: string;
  localLogin: boolean;
  services: string | undefined;
  dataDir: string;
  /** A running job's lease: after a crash (no graceful stop) another process or the next boot takes the job over once it expires. */
  jobLeaseMs: number;
}

export function readNodeConfig(env: NodeJS.ProcessEnv = process.env): NodeConfig {
  const port = env.PORT === undefined || env.PORT === '' ? 43127 : Number(env.PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be an integer from 0 to 65535, got '${env.PORT}'`);
  const databasePath = resolve(env.DATABASE_PATH || './data/citygate.sqlite');
  const localLogin = !/^(false|0|no|off)$/i.test(env.LOCAL_LOGIN ?? 'true');
  const jobLeaseMs = env.JOB_LEASE_MS === undefined || env.JOB_LEASE_MS === '' ? 5 * 60_000 : Number(env.JOB_LEASE_MS);
  if (!Number.isInteger(jobLeaseMs) || jobLeaseMs < 1000) throw new Error(`JOB_LEASE_MS must be an integer of at least 1000 (ms), got '${env.JOB_LEASE_MS}'`);
  return {
    host: env.HOST || '127.0.0.1',
    port,
    databasePath,
    localLogin,
    services: env.GATEWAY_SERVICES,
    dataDir: resolve(databasePath, '..'),
    jobLeaseMs,
  };
}
