// A database outage as this process sees it: calls that need the database answer
// 503 database_unavailable with Retry-After, the log says it once when it starts and once when
// it ends (with how many calls were refused meanwhile), not a stack per request, and a probe
// notices the end even when no traffic comes.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { GatewayError } from './errors.ts';
import type { Logger } from './log.ts';

const PROBE_MS = 500;
export const RETRY_AFTER_S = 2;

export class DatabaseOutage {
  readonly #db: Db;
  readonly #log: Logger;
  #since: number | null = null;
  #refused = 0;
  #probe: ReturnType<typeof setTimeout> | null = null;

  /** Whether a timer may probe for the end (not on Workers: a timer lives only as long as its request). */
  readonly #probes: boolean;

  constructor(db: Db, log: Logger, opts: { probe?: boolean } = {}) {
    this.#db = db;
    this.#log = log;
    this.#probes = opts.probe ?? true;
  }

  get down(): boolean {
    return this.#since !== null;
  }

  /** A call failed because the database is unreachable: its 503 (the outage starts if new). */
  refuse(e: unknown): GatewayError {
    this.noteDown(e);
    this.#refused++;
    return unavailable();
  }

  /** The database was found unreachable (by a call, a probe or a background write). */
  noteDown(e: unknown): void {
    // Without a probe the end is not seen: a failure more than a few seconds on counts as a new outage.
    if (this.#since !== null && !this.#probes && Date.now() - this.#since > 5000) this.#since = null;
    if (this.#since !== null) return;
    this.#since = Date.now();
    this.#refused = 0;
    this.#log('error', 'database unavailable: calls that need it answer 503 until it is back', { error: String((e as Error)?.message ?? e) });
    this.#schedule();
  }

  /** One cheap round trip; false (and the outage noted) when the database is unreachable. */
  async check(timeoutMs = 2000): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        sql`SELECT 1`.execute(this.#db.kysely),
        new Promise((_, reject) => (timer = setTimeout(() => reject(Object.assign(new Error('database check timed out'), { code: 'ETIMEDOUT' })), timeoutMs))),
      ]);
      this.#up();
      return true;
    } catch (e) {
      if (!isDatabaseUnavailable(e)) throw e;
      this.noteDown(e);
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  #schedule(): void {
    if (!this.#probes) return;
    this.#probe = setTimeout(() => {
      this.#probe = null;
      this.check().catch(() => {}).finally(() => {
        if (this.#since !== null && !this.#probe) this.#schedule();
      });
    }, PROBE_MS);
    (this.#probe as { unref?: () => void }).unref?.();
  }

  #up(): void {
    if (this.#since === null) return;
    this.#log('info', 'database available again', { down_ms: Date.now() - this.#since, refused: this.#refused });
    this.#since = null;
    if (this.#probe) clearTimeout(this.#probe);
    this.#probe = null;
  }

  stop(): void {
    if (this.#probe) clearTimeout(this.#probe);
    this.#probe = null;
  }
}

export function unavailable(): GatewayError {
  return new GatewayError(503, 'database_unavailable', 'The database is unavailable right now; try again shortly.', { headers: { 'retry-after': String(RETRY_AFTER_S) } });
}
