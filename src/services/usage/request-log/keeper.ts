// The 'request-logs' capability (kernel/request-log.ts): a finished call is redacted, its
// bodies written to blob storage (full mode) and its row written with others in a batch, all
// off the request path (a timer's turn after the response; a Worker keeps it alive with
// waitUntil and writes the row in that same background work, never in a later batch).
import type { GatewayContext } from '../../../kernel/context.ts';
import { randomToken } from '../../../kernel/crypto.ts';
import type { CapturedCall, RequestLogKeeper } from '../../../kernel/request-log.ts';
import { isUniqueViolation, rowsPerStatement } from '../../../db/database.ts';
import { build, type Row } from './entry.ts';
import { ModeOf } from './mode.ts';

/** Rows waiting for a batch at most (beyond: the oldest are dropped, said once per flush). */
const MAX_WAITING = 10_000;
const FLUSH_MS = 250;
export const BLOB_PREFIX = 'request-logs/';

export class RequestLogs implements RequestLogKeeper {
  readonly gw: GatewayContext;
  readonly #modes: ModeOf;
  #rows: Row[] = [];
  /** The batch being written, until its commit is known. */
  #retry: Row[] | null = null;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #chain: Promise<void> = Promise.resolve();
  #inFlight = new Set<Promise<void>>();
  #stopped = false;
  #warnedNoStorage = false;

  constructor(gw: GatewayContext) {
    this.gw = gw;
    this.#modes = new ModeOf(gw);
  }

  mode(identity: Parameters<RequestLogKeeper['mode']>[0]) {
    return this.#modes.mode(identity);
  }

  write(call: CapturedCall): void {
    // a macrotask later: the response has been handed to the runtime by then
    const p: Promise<void> = new Promise((r) => setTimeout(r, 0))
      .then(() => this.#store(call))
      .catch((e) => {
        if (!this.gw.databaseDown(e)) this.gw.log('error', 'request log dropped', { request_id: call.requestId, error: String(e) });
      })
      .finally(() => this.#inFlight.delete(p));
    this.#inFlight.add(p);
    this.gw.waitUntil(p);
  }

  async #store(call: CapturedCall): Promise<void> {
    const storage = this.gw.storage;
    const full = call.mode === 'full';
    if (full && !storage && !this.#warnedNoStorage) {
      this.#warnedNoStorage = true;
      this.gw.log('warn', 'REQUEST_LOG=full without blob storage: request logs keep metadata only (declare R2 storage)', {});
    }
    const { row, bodies } = build(call, full && !!storage);
    if (bodies && storage) {
      const key = `${BLOB_PREFIX}${new Date(row.created_at).toISOString().slice(0, 10)}/${randomToken(24)}.json`;
      await storage.put(key, new TextEncoder().encode(JSON.stringify(bodies)), 'application/json');
      row.blob_key = key;
    }
    this.#rows.push(row);
    if (this.#rows.length > MAX_WAITING) {
      this.#rows.splice(0, this.#rows.length - MAX_WAITING);
      this.gw.log('error', 'request-log buffer full: oldest rows dropped', { kept: MAX_WAITING });
    }
    if (this.#stopped || !this.gw.config.gracefulStop) return this.flush();
    this.#flushIn(FLUSH_MS);
  }

  /** A flush `ms` from now, unless one is due already (unref'd: it never keeps a process alive). */
  #flushIn(ms: number): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.gw.waitUntil(this.flush());
    }, ms);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Writes the waiting rows; serialized, so batches never interleave. */
  flush(): Promise<void> {
    this.#chain = this.#chain.then(() => this.#drain());
    return this.#chain;
  }

  async #drain(): Promise<void> {
    while (this.#retry || this.#rows.length) {
      // A batch whose commit is unknown is retried as exactly the same rows, so a UNIQUE clash
      // on its log ids means its first attempt committed (as the usage sink does).
      const batch = (this.#retry ??= this.#rows.splice(0, 500));
      const per = rowsPerStatement(this.gw.db.dialect, 15, 100);
      const statements = [];
      for (let i = 0; i < batch.length; i += per) statements.push(this.gw.db.kysely.insertInto('request_logs').values(batch.slice(i, i + per)).compile());
      try {
        await this.gw.db.batch(statements);
      } catch (e) {
        if (isUniqueViolation(e)) {
          this.#retry = null;
          continue;
        }
        if (!this.gw.databaseDown(e)) this.gw.log('error', 'request-log flush failed; will retry', { error: String(e), rows: batch.length });
        if (!this.#stopped) this.#flushIn(1000);
        return;
      }
      this.#retry = null;
    }
  }

  /** Graceful stop: the calls being stored, then every waiting row. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await Promise.all([...this.#inFlight]);
    await this.flush();
  }
}
