// usage/export: every usage record of a city (or all, for the admin) in a time range, as NDJSON
// or CSV, oldest first, streamed: the body is pulled page by page (keyset pagination on
// (created_at, seq), EXPORT_PAGE records per query) only as fast as the client reads it, so the
// gateway holds one page at a time however many records the range has.
import type { Selectable, SelectQueryBuilder } from 'kysely';
import type { Schema, UsageTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';

const EXPORT_PAGE = 1000;

/** Resolves on a later turn of the event loop (setImmediate on Node; a timer elsewhere). */
const nextTurn = (): Promise<void> =>
  new Promise((r) => ((globalThis as { setImmediate?: (f: () => void) => void }).setImmediate ?? ((f: () => void) => setTimeout(f, 0)))(r));

/** The CSV columns, in order: those of the console's earlier export first, then the rest of usage/list's fields. */
export const CSV_COLUMNS = [
  'created_at', 'request_id', 'city_id', 'user_id', 'model', 'mode', 'status', 'error_code', 'input_tokens', 'output_tokens',
  'cached_tokens', 'cache_write_tokens', 'cache_write_1h_tokens', 'images', 'seconds', 'credits', 'duration_ms', 'overhead_ms',
  'estimated', 'note', 'usage_id', 'alias', 'base_credits', 'margin_credits', 'upstream', 'attempts', 'key_id',
] as const;

const csvCell = (v: unknown) => {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

export function exportResponse<T extends Record<string, unknown>>(
  gw: GatewayContext,
  q: SelectQueryBuilder<Schema, 'usage', Selectable<UsageTable>>,
  format: 'ndjson' | 'csv',
  view: (r: Selectable<UsageTable>) => T,
  filename: string,
): Response {
  const enc = new TextEncoder();
  let after: [number, number] | null = null;
  let done = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      start(ctrl) {
        if (format === 'csv') ctrl.enqueue(enc.encode(CSV_COLUMNS.join(',') + '\r\n'));
      },
      async pull(ctrl) {
        if (done) return;
        // One turn of the event loop per page: a fast reader never makes the writer wait, so
        // without it a long export ran as one chain of promise jobs, holding the loop (other
        // requests, timers) and V8's garbage collection off for its whole length.
        if (after) await nextTurn();
        let page = q;
        if (after) {
          const [t, s] = after;
          // a plain lower bound on created_at first, so every index on (…, created_at) serves the range
          page = page.where('created_at', '>=', t).where((eb) => eb.or([eb('created_at', '>', t), eb('seq', '>', s)]));
        }
        let rows: Selectable<UsageTable>[];
        try {
          rows = await page.orderBy('created_at').orderBy('seq').limit(EXPORT_PAGE).execute();
        } catch (e) {
          gw.log('error', 'usage export failed mid-stream', { error: String(e) });
          ctrl.error(e);
          return;
        }
        const lines: string[] = new Array(rows.length);
        for (let i = 0; i < rows.length; i++) {
          const v = view(rows[i]);
          lines[i] = format === 'csv' ? CSV_COLUMNS.map((c) => csvCell(v[c])).join(',') + '\r\n' : JSON.stringify(v) + '\n';
        }
        if (lines.length) ctrl.enqueue(enc.encode(lines.join('')));
        if (rows.length < EXPORT_PAGE) {
          done = true;
          ctrl.close();
        } else {
          const last = rows[rows.length - 1];
          after = [Number(last.created_at), Number(last.seq)];
        }
      },
    },
    // nothing is read ahead of the client: one page in memory at a time
    { highWaterMark: 0 },
  );
  return new Response(stream, {
    status: 200,
    headers: {
      'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
      'content-disposition': `attachment; filename="${filename}.${format === 'csv' ? 'csv' : 'ndjson'}"`,
      'cache-control': 'no-store',
    },
  });
}
