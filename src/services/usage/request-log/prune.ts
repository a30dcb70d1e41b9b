// Request-log retention: rows older than REQUEST_LOG_RETENTION_DAYS (default 7; 0 keeps them
// forever) go in batches with their blobs, oldest first, part of the usage retention pass
// (retention.ts: a timer on Node, the scheduled handler on Workers). Blobs are deleted before
// their rows: a pass cut short leaves a row whose bodies are gone (read says so), never a blob
// no row points to. A blob whose row never came (a hard kill in the ~250 ms between the two
// writes) is found by its day: once every row of a day is past retention, the day's folder of
// blobs goes whole.
import type { GatewayContext } from '../../../kernel/context.ts';
import { BLOB_PREFIX } from './keeper.ts';

const DAY_MS = 86_400_000;
/**
 * Day folders before the cutoff's day swept by each pass. A pass runs hourly, so a folder meets
 * 72 passes; on Workers each folder is one R2 list call.
 */
const SWEPT_DAYS = 3;
export const DEFAULT_REQUEST_LOG_RETENTION_DAYS = 7;

export function requestLogRetentionDays(gw: GatewayContext): number {
  const raw = gw.env.get('REQUEST_LOG_RETENTION_DAYS');
  if (raw === undefined || raw === '') return DEFAULT_REQUEST_LOG_RETENTION_DAYS;
  const n = Number(raw);
  return Number.isFinite(n) && n >= 0 ? Math.floor(n) : DEFAULT_REQUEST_LOG_RETENTION_DAYS;
}

/** Deletes expired logs, `batch` rows (and their blobs) at a time; how many rows went. */
export async function pruneRequestLogs(gw: GatewayContext, now: number, batch: number, pause: (tookMs: number) => Promise<void>, stopped?: () => boolean): Promise<number> {
  const keep = requestLogRetentionDays(gw);
  if (keep <= 0) return 0;
  const cutoff = now - keep * DAY_MS;
  const n = await pruneRows(gw, cutoff, batch, pause, stopped);
  if (gw.storage && !stopped?.()) {
    let orphans = 0;
    const cutoffDay = Math.floor(cutoff / DAY_MS) * DAY_MS;
    for (let d = 1; d <= SWEPT_DAYS; d++) {
      // every row of that day was older than the cutoff, and went above: what is left has no row
      orphans += await gw.storage.deleteUnder(`${BLOB_PREFIX}${new Date(cutoffDay - d * DAY_MS).toISOString().slice(0, 10)}/`);
    }
    if (orphans) gw.log('info', 'request-log bodies with no log row deleted (a hard kill between their two writes)', { count: orphans });
  }
  return n;
}

async function pruneRows(gw: GatewayContext, cutoff: number, batch: number, pause: (tookMs: number) => Promise<void>, stopped?: () => boolean): Promise<number> {
  const k = gw.db.kysely;
  let n = 0;
  for (;;) {
    const t = Date.now();
    const rows = await k.selectFrom('request_logs').select(['log_id', 'blob_key']).where('created_at', '<', cutoff).orderBy('created_at').limit(batch).execute();
    if (rows.length === 0) break;
    const keys = rows.map((r) => r.blob_key).filter((b): b is string => !!b);
    if (keys.length && gw.storage) await gw.storage.delete(keys);
    // D1 binds at most 100 parameters per statement
    const ids = rows.map((r) => r.log_id);
    for (let i = 0; i < ids.length; i += 90) await k.deleteFrom('request_logs').where('log_id', 'in', ids.slice(i, i + 90)).execute();
    n += rows.length;
    if (rows.length < batch || stopped?.()) break;
    await pause(Date.now() - t);
  }
  return n;
}
