// usage/stats for one user API key (key_id): the rollups have no key, so the sums come from the
// key's own records (index usage_by_key), grouped by the database; the overhead percentiles are
// exact nearest-rank over the newest SAMPLE records of the range (overhead_sample says whether
// that was all of them). Records are kept USAGE_RETENTION_DAYS: older days count nothing here.
import { sql } from 'kysely';
import type { GatewayContext } from '../../kernel/context.ts';
import { usdOf } from '../balance/index.ts';
import { dayRange, percentile } from './stats.ts';

const SAMPLE = 50_000;
const DAY_MS = 86_400_000;
type Group = 'day' | 'city' | 'model';
const SUMS = ['calls', 'errors', 'input_tokens', 'output_tokens', 'cached_tokens', 'cache_write_tokens', 'credits', 'base_credits'] as const;
type Sums = Record<(typeof SUMS)[number], number>;

const dayText = (d: number) => new Date(d * DAY_MS).toISOString().slice(0, 10);

export async function keyUsageStats(gw: GatewayContext, f: { from?: string; to?: string; cityId?: string; model?: string; keyId: string; group: Group[] }) {
  const { from, to, start, end } = dayRange(f);
  const where = [sql`key_id = ${f.keyId}`, sql`created_at >= ${start}`, sql`created_at < ${end}`];
  if (f.cityId !== undefined) where.push(sql`city_id = ${f.cityId}`);
  if (f.model !== undefined) where.push(sql`model = ${f.model}`);
  const cond = sql.join(where, sql` AND `);
  const keys: string[] = [];
  if (f.group.includes('day')) keys.push('d');
  if (f.group.includes('city')) keys.push('city_id');
  if (f.group.includes('model')) keys.push('model');
  const day = sql`(created_at / ${DAY_MS}) AS d`; // integer division on every dialect (BIGINT / BIGINT)
  const { rows } = await sql<Record<string, unknown>>`SELECT ${sql.join([
    ...(f.group.includes('day') ? [day] : []),
    ...keys.filter((k) => k !== 'd').map((k) => sql.raw(k)),
    sql`COUNT(*) AS calls`,
    sql`SUM(CASE WHEN status <> 'ok' THEN 1 ELSE 0 END) AS errors`,
    sql`SUM(input_tokens) AS input_tokens`,
    sql`SUM(output_tokens) AS output_tokens`,
    sql`SUM(cached_tokens) AS cached_tokens`,
    sql`SUM(cache_write_tokens) AS cache_write_tokens`,
    sql`SUM(credits) AS credits`,
    sql`SUM(COALESCE(base_credits, credits)) AS base_credits`,
  ])} FROM usage WHERE ${cond} ${keys.length ? sql.raw(`GROUP BY ${keys.join(', ')}`) : sql``}`.execute(gw.db.kysely);
  const samples = await sql<{ d: number; city_id: string | null; model: string; overhead_ms: number }>`
    SELECT (created_at / ${DAY_MS}) AS d, city_id, model, overhead_ms FROM usage
    WHERE ${cond} AND overhead_ms IS NOT NULL ORDER BY created_at DESC LIMIT ${SAMPLE}`.execute(gw.db.kysely);

  const idOf = (d: unknown, city: unknown, model: unknown) =>
    [f.group.includes('day') ? String(Number(d)) : '', f.group.includes('city') ? String(city ?? '') : '', f.group.includes('model') ? String(model) : ''].join('\u0000');
  const overheads = new Map<string, number[]>();
  const all: number[] = [];
  for (const r of samples.rows) {
    const id = idOf(r.d, r.city_id, r.model);
    let list = overheads.get(id);
    if (!list) overheads.set(id, (list = []));
    list.push(Number(r.overhead_ms));
    all.push(Number(r.overhead_ms));
  }
  const finish = (sums: Sums, o: number[]) => {
    o.sort((a, b) => a - b);
    return { ...sums, margin_credits: sums.credits - sums.base_credits, usd: usdOf(sums.credits), overhead_p50_ms: percentile(o, 50), overhead_p99_ms: percentile(o, 99) };
  };
  const total = Object.fromEntries(SUMS.map((k) => [k, 0])) as Sums;
  const items = rows
    .filter((r) => Number(r.calls) > 0)
    .map((r) => {
      const sums = {} as Sums;
      for (const k of SUMS) total[k] += sums[k] = Number(r[k] ?? 0);
      const head: { day?: string; city_id?: string | null; model?: string } = {};
      if (f.group.includes('day')) head.day = dayText(Number(r.d));
      if (f.group.includes('city')) head.city_id = r.city_id == null || r.city_id === '' ? null : String(r.city_id);
      if (f.group.includes('model')) head.model = String(r.model);
      return { ...head, ...finish(sums, overheads.get(idOf(r.d, r.city_id, r.model)) ?? []) };
    });
  const cmp = (x = '', y = '') => (x < y ? -1 : x > y ? 1 : 0);
  items.sort((a, b) => cmp(a.day, b.day) || cmp(a.city_id ?? '', b.city_id ?? '') || cmp(a.model, b.model));
  return { from, to, group: f.group, items, totals: finish(total, all), overhead_sample: { records: all.length, complete: all.length < SAMPLE } };
}
