// usage/stats: calls, errors, tokens and credits per group (day, city, model, or any mix)
// over a range of UTC days, with the p50 and p99 of citygate's overhead per group. All of it
// comes from the hourly rollup (rollup.ts), summed by the database: totals are exact; the
// percentiles are read from the overhead histogram (within one bucket, ~26 %, of the exact
// nearest-rank value, never above the largest value seen), over every record of the range.
// Whole days are read from the daily rollup; the hourly one keeps the finer detail.
import { z } from 'zod';
import type { GatewayContext } from '../../kernel/context.ts';
import { badRequest } from '../../kernel/errors.ts';
import { usdOf } from '../balance/index.ts';
import { BUCKET_COLUMNS, BUCKETS, histogramPercentile } from './rollup.ts';
import { dayOf } from './sink.ts';
import { sql } from 'kysely';

const DAY_MS = 86_400_000;
const MAX_DAYS = 366;
const GROUPS = ['day', 'city', 'model'] as const;
type Group = (typeof GROUPS)[number];

export const statsGroup = z
  .string()
  .max(40)
  .default('day,city,model')
  .transform((s, ctx) => {
    const parts = [...new Set(s.split(',').map((p) => p.trim()).filter(Boolean))];
    for (const p of parts) {
      if (!(GROUPS as readonly string[]).includes(p)) {
        ctx.addIssue({ code: 'custom', message: `unknown group '${p}' (use day, city, model, comma-separated, or empty for totals only)` });
        return z.NEVER;
      }
    }
    return GROUPS.filter((g) => parts.includes(g));
  });

const SUM_COLUMNS = ['calls', 'errors', 'input_tokens', 'output_tokens', 'cached_tokens', 'cache_write_tokens', 'credits', 'base_credits'] as const;
const SUMS = SUM_COLUMNS;
type Sums = Record<(typeof SUMS)[number], number>;
const zero = (): Sums => ({ calls: 0, errors: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0, cache_write_tokens: 0, credits: 0, base_credits: 0 });

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** A group's sums, read from the hourly rollup; hist/max: its overhead histogram. */
export interface RollupGroup {
  day?: string;
  city_id?: string | null;
  model?: string;
  sums: Sums & { duration_ms: number };
  hist: number[];
  max: number;
}

/**
 * Σ of the daily rollup per group (day, city, model or any mix) over the whole UTC days of
 * [start, end) epoch ms, aggregated by the database: one row per group, however many it sums.
 */
export async function rollupGroups(
  gw: GatewayContext,
  f: { start: number; end: number; cityId?: string; model?: string; group: readonly Group[]; histogram?: boolean },
): Promise<RollupGroup[]> {
  const hist = f.histogram ?? true; // the overhead percentiles' 40 columns: only when asked
  const keys: string[] = [];
  if (f.group.includes('day')) keys.push('day');
  if (f.group.includes('city')) keys.push('city_id');
  if (f.group.includes('model')) keys.push('model');
  const by = keys;
  const cols = [...SUM_COLUMNS, 'overhead_n', 'duration_ms', ...(hist ? BUCKET_COLUMNS : [])].map((c) => sql.raw(`SUM(${c}) AS ${c}`));
  // whole UTC days: the daily rollup (far fewer rows than the hourly one)
  const where = [sql`day >= ${dayOf(f.start)}`, sql`day <= ${dayOf(f.end - 1)}`];
  if (f.cityId !== undefined) where.push(sql`city_id = ${f.cityId}`);
  if (f.model !== undefined) where.push(sql`model = ${f.model}`);
  // the smallest daily rollup that has the columns asked for
  const byCity = f.group.includes('city') || f.cityId !== undefined;
  const byModel = f.group.includes('model') || f.model !== undefined;
  const table = byCity && byModel ? 'usage_daily' : byCity ? 'usage_daily_city' : 'usage_daily_model';
  const q = sql<Record<string, unknown>>`SELECT ${sql.join([...keys.map((k) => sql.raw(k)), ...cols, sql`MAX(overhead_max) AS overhead_max`])}
    FROM ${sql.table(table)} WHERE ${sql.join(where, sql` AND `)}
    ${by.length ? sql.raw(`GROUP BY ${by.join(', ')}`) : sql``}`;
  const { rows } = await q.execute(gw.db.kysely);
  const out: RollupGroup[] = [];
  for (const r of rows) {
    if (r.calls === null || Number(r.calls) === 0) continue; // no rows: SUM of nothing
    const sums = zero() as RollupGroup['sums'];
    for (const k of SUM_COLUMNS) sums[k] = Number(r[k]);
    sums.duration_ms = Number(r.duration_ms);
    const g: RollupGroup = { sums, hist: hist ? BUCKET_COLUMNS.map((c) => Number(r[c])) : [], max: Number(r.overhead_max) };
    if (f.group.includes('day')) g.day = String(r.day);
    if (f.group.includes('city')) g.city_id = r.city_id === '' ? null : String(r.city_id);
    if (f.group.includes('model')) g.model = String(r.model);
    out.push(g);
  }
  const cmp = (x = '', y = '') => (x < y ? -1 : x > y ? 1 : 0); // ids, not prose: no locale rules needed
  return out.sort((a, b) => cmp(a.day, b.day) || cmp(a.city_id ?? '', b.city_id ?? '') || cmp(a.model, b.model));
}

/** A range of UTC days (both ends included), checked; its bounds in epoch ms. */
export function dayRange(f: { from?: string; to?: string }, maxDays = MAX_DAYS) {
  const to = f.to ?? dayOf(Date.now());
  const from = f.from ?? dayOf(Date.parse(to) - 29 * DAY_MS);
  if (from > to) throw badRequest('invalid_range', 'from must not be after to.', 'from');
  if ((Date.parse(to) - Date.parse(from)) / DAY_MS >= maxDays) throw badRequest('invalid_range', `A range spans at most ${maxDays} days.`, 'from');
  return { from, to, start: Date.parse(`${from}T00:00:00Z`), end: Date.parse(`${to}T00:00:00Z`) + DAY_MS };
}

export async function usageStats(
  gw: GatewayContext,
  f: { from?: string; to?: string; cityId?: string; model?: string; group: Group[] },
) {
  const { from, to, start, end } = dayRange(f);
  const groups = await rollupGroups(gw, { start, end, cityId: f.cityId, model: f.model, group: f.group });
  const total = zero();
  const hist = new Array(BUCKETS).fill(0);
  let max = 0;
  for (const g of groups) {
    for (const k of SUMS) total[k] += g.sums[k];
    g.hist.forEach((n, i) => (hist[i] += n));
    max = Math.max(max, g.max);
  }
  const finish = (sums: Sums, h: number[], m: number) => ({
    ...sums,
    margin_credits: sums.credits - sums.base_credits,
    usd: usdOf(sums.credits),
    overhead_p50_ms: histogramPercentile(h, m, 50),
    overhead_p99_ms: histogramPercentile(h, m, 99),
  });
  const items = groups.map(({ day, city_id, model, sums, hist: h, max: m }) => {
    const keys: { day?: string; city_id?: string | null; model?: string } = {};
    if (day !== undefined) keys.day = day;
    if (f.group.includes('city')) keys.city_id = city_id;
    if (model !== undefined) keys.model = model;
    const plain = {} as Sums;
    for (const k of SUMS) plain[k] = sums[k];
    return { ...keys, ...finish(plain, h, m) };
  });
  const n = hist.reduce((a, b) => a + b, 0);
  return { from, to, group: f.group, items, totals: finish(total, hist, max), overhead_sample: { records: n, complete: true } };
}
