// Worker settings. The Worker's string vars are the "process env" of the gateway (the env
// table still comes first); its bindings are found by the names the deploy step writes
// from city.json into these vars.
import type { ProcessEnv } from '../../kernel/runtime-env.ts';
import type { WorkerEnv } from './types.ts';

export const DEFAULT_BINDINGS = { database: 'DB', queue: 'JOBS', storage: 'MEDIA' } as const;

export interface WorkerConfig {
  databaseBinding: string;
  queueBinding: string;
  /** Null when city.json declares no storage. */
  storageBinding: string | null;
  storagePublicUrl: string | null;
  localLogin: boolean;
  services: string | undefined;
  version: string | undefined;
}

/** The string vars of a Worker env: what the gateway sees as its process environment. */
export function varsOf(env: WorkerEnv): ProcessEnv {
  const vars: ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) if (typeof v === 'string') vars[k] = v;
  return vars;
}

export function readWorkerConfig(env: WorkerEnv): WorkerConfig {
  const s = (k: string) => (typeof env[k] === 'string' && env[k] !== '' ? (env[k] as string) : undefined);
  const storageBinding = s('CITYGATE_STORAGE_BINDING') ?? null;
  return {
    databaseBinding: s('CITYGATE_DATABASE_BINDING') ?? DEFAULT_BINDINGS.database,
    queueBinding: s('CITYGATE_QUEUE_BINDING') ?? DEFAULT_BINDINGS.queue,
    storageBinding,
    storagePublicUrl: s('CITYGATE_STORAGE_PUBLIC_URL') ?? null,
    // The edge is public: the credential-free local login is off unless LOCAL_LOGIN=true.
    localLogin: /^(true|1|yes|on)$/i.test(s('LOCAL_LOGIN') ?? 'false'),
    services: s('GATEWAY_SERVICES'),
    version: s('CITYGATE_VERSION'),
  };
}
