// The temporary wrangler configuration a deploy generates from city.json. It lives in the
// project directory only while wrangler runs (so `main` resolves as written) and is
// removed afterwards; the project keeps no wrangler config of its own.
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Declaration } from './declaration.ts';

/** Supported by the pinned wrangler/workerd; bump deliberately with them. */
export const COMPATIBILITY_DATE = '2025-09-01';
export const PLACEHOLDER_ID = '00000000-0000-0000-0000-000000000000';
export const TEMP_CONFIG_PREFIX = '.citygate-wrangler-';

export interface ResolvedResources {
  databaseId: string | null;
}

/**
 * The admin console's built files (console/dist of the citygate package running this deploy),
 * uploaded as the Worker's static assets: Cloudflare serves /console/* from them before the
 * Worker runs. Null when this installation has no built console.
 */
export function consoleAssetsDir(): string | null {
  const dir = resolve(import.meta.dirname, '../../../console/dist');
  return existsSync(join(dir, 'console/index.html')) ? dir : null;
}

export function wranglerConfig(decl: Declaration, res: ResolvedResources, opts: { accountId?: string; version?: string; consoleDir?: string | null }) {
  const { database, queue, storage } = decl.resources;
  const vars: Record<string, string> = {
    CITYGATE_DATABASE_BINDING: database.binding,
    CITYGATE_QUEUE_BINDING: queue.binding,
  };
  if (storage) {
    vars.CITYGATE_STORAGE_BINDING = storage.binding;
    if (storage.public_url_prefix) vars.CITYGATE_STORAGE_PUBLIC_URL = storage.public_url_prefix;
  }
  if (opts.version) vars.CITYGATE_VERSION = opts.version;
  return {
    name: decl.name,
    main: decl.entry,
    compatibility_date: COMPATIBILITY_DATE,
    ...(opts.accountId ? { account_id: opts.accountId } : {}),
    workers_dev: true,
    observability: { enabled: true },
    d1_databases: [{ binding: database.binding, database_name: database.name, database_id: res.databaseId ?? PLACEHOLDER_ID }],
    queues: {
      producers: [{ binding: queue.binding, queue: queue.name }],
      consumers: [{ queue: queue.name, max_batch_size: 10, max_batch_timeout: 2, max_retries: 5 }],
    },
    // housekeeping off the request path (usage retention): the Worker's scheduled handler
    triggers: { crons: ['17 * * * *'] },
    ...(storage ? { r2_buckets: [{ binding: storage.binding, bucket_name: storage.name }] } : {}),
    // Only files that exist are served from assets; every other path (all of /v1) runs the Worker.
    // The binding lets the Worker read users.html for each city's users' page (/u/<city_id>/).
    ...(opts.consoleDir ? { assets: { directory: opts.consoleDir, binding: 'ASSETS', html_handling: 'auto-trailing-slash', not_found_handling: 'none' } } : {}),
    vars,
  };
}

export interface TempConfig {
  path: string;
  remove(): void;
}

export function writeTempConfig(dir: string, config: object): TempConfig {
  const path = join(dir, `${TEMP_CONFIG_PREFIX}${randomBytes(4).toString('hex')}.json`);
  writeFileSync(path, JSON.stringify(config, null, 2) + '\n');
  return { path, remove: () => rmSync(path, { force: true }) };
}
