// What services get from the kernel. The kernel knows no service by name: services that
// need each other go through capabilities (`provide`/`use`) and hooks.
import type { Db } from '../db/database.ts';
import type { CityStatusCache } from './city-status.ts';
import type { UpstreamHttp } from './http.ts';
import type { JobQueue } from './jobs.ts';
import type { Logger } from './log.ts';
import type { RuntimeEnv } from './runtime-env.ts';
import type { ServiceDef } from './service.ts';
import type { BlobStore } from './storage.ts';
import type { KeyRing } from './tokens.ts';
import type { UserKeys } from './user-keys.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { PublicUrlFallback } from './public-url.ts';

export interface GatewayConfig {
  name: string;
  version: string;
  /** Credential-free local login (LOCAL_LOGIN); false in the container deployment. */
  localLogin: boolean;
  /** Request body limit in bytes when an action sets none. */
  maxBodyBytes: number;
  /**
   * Whether the runtime calls stop() before it goes away (Node, on SIGTERM/SIGINT). A Worker
   * never does: a service that buffers writes must then write each request's share in the
   * background of that request (gw.waitUntil) instead of holding it for a later batch.
   */
  gracefulStop: boolean;
  /** Where the public URL comes from when GATEWAY_CITY_BASE_URL is unset (public-url.ts); default 'loopback-request'. */
  publicUrlFallback?: PublicUrlFallback;
}

export interface GatewayContext {
  readonly db: Db;
  readonly env: RuntimeEnv;
  readonly keys: KeyRing;
  /** Users' API keys, verified and cached (user-keys.ts). */
  readonly userKeys: UserKeys;
  readonly cities: CityStatusCache;
  /** Rate limits (counters in the database, see rate-limit.ts). */
  readonly limits: RateLimiter;
  readonly jobs: JobQueue;
  readonly storage: BlobStore | null;
  /** Outbound HTTP to upstream providers, chosen by the runtime. */
  readonly http: UpstreamHttp;
  readonly log: Logger;
  readonly config: GatewayConfig;
  /** The mounted services, by id. */
  readonly services: ReadonlyMap<string, ServiceDef>;
  /** Offers a capability to other services (e.g. balance offers 'billing'). */
  provide<T>(name: string, impl: T): void;
  use<T>(name: string): T | undefined;
  /** Keeps background work alive (Workers' waitUntil; on Node awaited at shutdown). */
  waitUntil(p: Promise<unknown>): void;
  /**
   * The public base URL: GATEWAY_CITY_BASE_URL's origin; without it the request's origin only
   * where it cannot be spoofed (public-url.ts), else throws 503 public_url_not_configured.
   */
  publicOrigin(req?: Request): string;
  /**
   * True when `e` means the database is unreachable (a restart, a failover): the outage is
   * then logged once for the process (kernel/database-outage.ts), so background work that
   * retries (usage and charge batches, the job runner) need not log every failed attempt.
   */
  databaseDown(e: unknown): boolean;
}
