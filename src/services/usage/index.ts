// usage: one record per AI call (failed ones too), per-user and admin listings, and a daily
// summary per city and model read from a rollup kept in step with the records.
import type { Selectable, SelectQueryBuilder } from 'kysely';
import { z } from 'zod';
import type { Schema, UsageTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { badRequest } from '../../kernel/errors.ts';
import type { Identity } from '../../kernel/identity.ts';
import { METERING } from '../../kernel/metering.ts';
import { action, defineService, pageQuery } from '../../kernel/service.ts';
import { scopeCity, usdOf } from '../balance/index.ts';
import { cityIdSchema } from '../cities/index.ts';
import { dayOf, UsageBuffer } from './sink.ts';
import { statsGroup, usageStats } from './stats.ts';

export { UsageBuffer } from './sink.ts';

const sinks = new WeakMap<GatewayContext, UsageBuffer>();

const toUsage = (r: Selectable<UsageTable>) => ({
  usage_id: r.usage_id,
  request_id: r.request_id,
  city_id: r.city_id,
  user_id: r.user_id,
  model: r.model,
  mode: r.mode,
  status: r.status,
  error_code: r.error_code,
  input_tokens: r.input_tokens,
  output_tokens: r.output_tokens,
  cached_tokens: r.cached_tokens,
  images: r.images,
  seconds: r.seconds,
  credits: r.credits,
  duration_ms: r.duration_ms,
  overhead_ms: r.overhead_ms ?? null,
  created_at: new Date(r.created_at).toISOString(),
  /** The upstream reported no usage: the tokens are citygate's estimate (docs/money.md). */
  estimated: r.estimated === 1,
});

/** A time bound: epoch ms, or an ISO date / date-time. */
const timeBound = z
  .union([z.coerce.number().int().min(0), z.iso.date(), z.iso.datetime({ offset: true })])
  .transform((v) => (typeof v === 'number' ? v : Date.parse(v)));

const day = z.iso.date();

const statsRow = z.object({
  day: z.string().optional(),
  city_id: z.string().nullable().optional(),
  model: z.string().optional(),
  calls: z.number().int(),
  errors: z.number().int(),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  cached_tokens: z.number().int(),
  credits: z.number().int(),
  usd: z.number(),
  overhead_p50_ms: z.number().nullable(),
  overhead_p99_ms: z.number().nullable(),
});
const statsOutput = z.object({
  from: z.string(),
  to: z.string(),
  group: z.array(z.enum(['day', 'city', 'model'])),
  items: z.array(statsRow),
  totals: statsRow,
  overhead_sample: z.object({ records: z.number().int(), complete: z.boolean() }),
});

function parseCursor(c: string | undefined): [number, number] | null {
  if (c === undefined) return null;
  const m = /^(\d{1,15})_(\d{1,15})$/.exec(c);
  if (!m) throw badRequest('invalid_cursor', 'cursor is not one this API returned.', 'cursor');
  return [Number(m[1]), Number(m[2])];
}

async function page(
  q: SelectQueryBuilder<Schema, 'usage', Selectable<UsageTable>>,
  cursor: string | undefined,
  limit: number,
): Promise<{ items: ReturnType<typeof toUsage>[]; next_cursor: string | null }> {
  const c = parseCursor(cursor);
  if (c) q = q.where((eb) => eb.or([eb('created_at', '<', c[0]), eb.and([eb('created_at', '=', c[0]), eb('seq', '<', c[1])])]));
  const rows = await q.orderBy('created_at', 'desc').orderBy('seq', 'desc').limit(limit + 1).execute();
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return { items: items.map(toUsage), next_cursor: rows.length > limit ? `${last.created_at}_${last.seq}` : null };
}

export const usageService = defineService({
  id: 'usage',
  name: 'Usage',
  description: 'One record per AI call, and daily totals per city and model.',
  env: [
    { key: 'USAGE_FLUSH_MS', description: 'How long records wait in memory before a batch write (default 250; a Worker writes them after each request).', required: false },
    { key: 'USAGE_BATCH_SIZE', description: 'Records per batch write (default 500).', required: false },
  ],
  init(gw) {
    const sink = new UsageBuffer(gw);
    sinks.set(gw, sink);
    gw.provide(METERING, sink);
  },
  async stop(gw) {
    await sinks.get(gw)?.stop();
  },
  actions: {
    me: action({
      method: 'GET',
      auth: ['user'],
      summary: 'Usage records of the calling user, newest first',
      input: z.object({ city_id: z.string().optional(), model: z.string().max(200).optional(), ...pageQuery }),
      handler: async ({ gateway, identity, input }) => {
        const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
        let q = gateway.db.kysely.selectFrom('usage').selectAll().where('city_id', '=', cityId).where('user_id', '=', userId);
        if (input.model) q = q.where('model', '=', input.model);
        return page(q, input.cursor, input.limit);
      },
    }),
    list: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Usage records, newest first (filters: city, user, model, status, from, to)',
      input: z.object({
        city_id: cityIdSchema.optional(),
        user_id: z.string().min(1).max(200).optional(),
        model: z.string().max(200).optional(),
        status: z.enum(['ok', 'error', 'aborted']).optional(),
        from: timeBound.optional(),
        to: timeBound.optional(),
        ...pageQuery,
      }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id);
        let q = gateway.db.kysely.selectFrom('usage').selectAll();
        if (cityId) q = q.where('city_id', '=', cityId);
        if (input.user_id) q = q.where('user_id', '=', input.user_id);
        if (input.model) q = q.where('model', '=', input.model);
        if (input.status) q = q.where('status', '=', input.status);
        if (input.from !== undefined) q = q.where('created_at', '>=', input.from);
        if (input.to !== undefined) q = q.where('created_at', '<', input.to);
        return page(q, input.cursor, input.limit);
      },
    }),
    summary: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Totals per day × city × model over a date range (UTC days, both ends included)',
      input: z.object({
        from: day.optional(),
        to: day.optional(),
        city_id: cityIdSchema.optional(),
        model: z.string().max(200).optional(),
      }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id);
        const to = input.to ?? dayOf(Date.now());
        const from = input.from ?? dayOf(Date.parse(to) - 29 * 86_400_000);
        if (from > to) throw badRequest('invalid_range', 'from must not be after to.', 'from');
        let q = gateway.db.kysely.selectFrom('usage_daily').selectAll().where('day', '>=', from).where('day', '<=', to);
        if (cityId) q = q.where('city_id', '=', cityId);
        if (input.model) q = q.where('model', '=', input.model);
        const rows = await q.orderBy('day').orderBy('city_id').orderBy('model').execute();
        const totals = { calls: 0, errors: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0, credits: 0, duration_ms: 0 };
        const items = rows.map((r) => {
          for (const k of Object.keys(totals) as (keyof typeof totals)[]) totals[k] += r[k];
          return { ...r, city_id: r.city_id === '' ? null : r.city_id, usd: usdOf(r.credits) };
        });
        return { from, to, items, totals: { ...totals, usd: usdOf(totals.credits) } };
      },
    }),
    stats: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Calls, errors, tokens, credits and p50/p99 citygate overhead per day, city and/or model (group=day,city,model)',
      input: z.object({
        from: day.optional(),
        to: day.optional(),
        city_id: cityIdSchema.optional(),
        model: z.string().max(200).optional(),
        group: statsGroup,
      }),
      output: statsOutput,
      handler: async ({ gateway, identity, input }) =>
        usageStats(gateway, { from: input.from, to: input.to, cityId: scopeCity(identity, input.city_id), model: input.model, group: input.group }),
    }),
  },
});
