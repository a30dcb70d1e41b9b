// Forward-only migrations, applied in this order at boot. Never edit one that has shipped:
// add a new file. Numbers are spaced by area so parallel work does not collide.
import kernel from './001_kernel.ts';
import ai from './010_ai.ts';
import accounts from './020_accounts.ts';
import money from './030_money.ts';
import moneyLeaks from './031_money_leaks.ts';
import usageOverhead from './036_usage_overhead.ts';
import upstreams from './040_upstreams.ts';
import type { Kysely } from 'kysely';
import type { Statement } from '../database.ts';
import security from './060_security.ts';
import leases from './070_leases.ts';
import leaseFlushes from './080_lease_flushes.ts';
import cacheWrites from './082_cache_writes.ts';
import models from './083_models.ts';
import usageHourly from './084_usage_hourly.ts';
import usageListIndexes from './085_usage_list_indexes.ts';
import requestLogs from './086_request_logs.ts';
import usagePartitions from './088_usage_partitions.ts';
import webhooks from './090_webhooks.ts';
import userKeys from './092_user_keys.ts';
import plans from './094_plans.ts';
import windowSlices from './095_window_slices.ts';
import mcpServers from './096_mcp_servers.ts';
import usageKeyIndex from './097_usage_key_index.ts';

/** One statement: portable SQL (translated for PostgreSQL by dialects/postgres-ddl.ts), or both texts. */
export type MigrationStatement = string | { sqlite: string; postgres: string };

export interface Migration {
  name: string;
  /** SQL texts, or statements built with Kysely's schema builder for the database's dialect. */
  statements: MigrationStatement[] | ((db: Kysely<any>) => Statement[]);
}

export const migrations: Migration[] = [
  { name: '001_kernel', statements: kernel },
  { name: '010_ai', statements: ai },
  { name: '020_accounts', statements: accounts },
  { name: '030_money', statements: money },
  { name: '031_money_leaks', statements: moneyLeaks },
  { name: '036_usage_overhead', statements: usageOverhead },
  { name: '040_upstreams', statements: upstreams },
  { name: '060_security', statements: security },
  { name: '070_leases', statements: leases },
  { name: '080_lease_flushes', statements: leaseFlushes },
  { name: '082_cache_writes', statements: cacheWrites },
  { name: '083_models', statements: models },
  { name: '084_usage_hourly', statements: usageHourly },
  { name: '085_usage_list_indexes', statements: usageListIndexes },
  { name: '086_request_logs', statements: requestLogs },
  { name: '088_usage_partitions', statements: usagePartitions },
  { name: '090_webhooks', statements: webhooks },
  { name: '092_user_keys', statements: userKeys },
  { name: '094_plans', statements: plans },
  { name: '095_window_slices', statements: windowSlices },
  { name: '096_mcp_servers', statements: mcpServers },
  { name: '097_usage_key_index', statements: usageKeyIndex },
];
