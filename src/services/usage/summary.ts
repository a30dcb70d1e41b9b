// usage/summary: one item per UTC day × city × model, a page at a time. Its items are the rows
// of the daily rollup as they are (its key is day × city × model), read in key order from
// where the cursor left off: one index range, however many days and cities the range spans.
// A week of every city is ~67,000 items at 200 cities × 50 models, 1.8 s to build and send in
// one answer at 5M records (measured before paging), so an answer holds at most `limit` items
// (default 1,000) and a `next_cursor`; the totals always cover the whole range.
import { sql } from 'kysely';
import type { GatewayContext } from '../../kernel/context.ts';
import { decodeKeyCursor, encodeKeyCursor } from '../../kernel/cursor.ts';
import { badRequest } from '../../kernel/errors.ts';
import { usdOf } from '../balance/index.ts';
import { rollupGroups } from './stats.ts';

export const SUMMARY_LIMIT = 1000;
export const SUMMARY_MAX_LIMIT = 10_000;

const SUMS = ['calls', 'errors', 'input_tokens', 'output_tokens', 'cached_tokens', 'cache_write_tokens', 'credits', 'base_credits', 'duration_ms'] as const;
type Sums = Record<(typeof SUMS)[number], number>;

/** The cursor: the last item's key (day, city, model). */
function decodeCursor(c: string): [string, string, string] {
  const k = decodeKeyCursor(c);
  if (k && k.length === 3 && k.every((x) => typeof x === 'string')) return k as [string, string, string];
  throw badRequest('invalid_cursor', 'cursor is not one this API returned.', 'cursor');
}

const priced = <T extends Sums>(s: T) => ({ ...s, margin_credits: s.credits - s.base_credits, usd: usdOf(s.credits) });

export async function summaryPage(
  gw: GatewayContext,
  f: { from: string; to: string; cityId?: string; model?: string; cursor?: string; limit: number },
) {
  const where = [sql`day >= ${f.from}`, sql`day <= ${f.to}`];
  if (f.cityId !== undefined) where.push(sql`city_id = ${f.cityId}`);
  if (f.model !== undefined) where.push(sql`model = ${f.model}`);
  if (f.cursor !== undefined) {
    const [d, c, m] = decodeCursor(f.cursor);
    where.push(sql`(day, city_id, model) > (${d}, ${c}, ${m})`);
  }
  const { rows } = await sql<Record<string, unknown>>`SELECT day, city_id, model, ${sql.raw(SUMS.join(', '))}
    FROM usage_daily WHERE ${sql.join(where, sql` AND `)}
    ORDER BY day, city_id, model LIMIT ${f.limit + 1}`.execute(gw.db.kysely);
  const page = rows.slice(0, f.limit);
  const items = page.map((r) => {
    const sums = {} as Sums;
    for (const k of SUMS) sums[k] = Number(r[k]);
    return { day: String(r.day), city_id: r.city_id === '' ? null : String(r.city_id), model: String(r.model), ...priced(sums) };
  });
  const last = page[page.length - 1];
  // the totals of the whole range: the smallest daily rollup that has the filters' columns
  const start = Date.parse(`${f.from}T00:00:00Z`);
  const end = Date.parse(`${f.to}T00:00:00Z`) + 86_400_000;
  const [all] = await rollupGroups(gw, { start, end, cityId: f.cityId, model: f.model, group: [], histogram: false });
  const totals = {} as Sums;
  for (const k of SUMS) totals[k] = all ? all.sums[k] : 0;
  return {
    from: f.from,
    to: f.to,
    items,
    totals: priced(totals),
    next_cursor: rows.length > f.limit ? encodeKeyCursor([String(last.day), String(last.city_id), String(last.model)]) : null,
  };
}
