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
import { scopeCity } from '../balance/index.ts';
import { cityIdSchema } from '../cities/index.ts';
import { exportResponse } from './export.ts';
import { isPartitioned } from './partitions.ts';
import { DEFAULT_RETENTION_DAYS, prune, PruneTimer } from './retention.ts';
import { UsageBuffer } from './sink.ts';
import { RequestLogs } from './request-log/keeper.ts';
import { DEFAULT_REQUEST_LOG_RETENTION_DAYS } from './request-log/prune.ts';
import { readRequestLog, requestLogOutput } from './request-log/read.ts';
import { REQUEST_LOGS } from '../../kernel/request-log.ts';
import { dayRange, statsGroup, usageStats } from './stats.ts';
import { keyUsageStats } from './key-stats.ts';
import { SUMMARY_LIMIT, SUMMARY_MAX_LIMIT, summaryPage } from './summary.ts';
import { meDailyAction } from './me-daily.ts';

export { UsageBuffer } from './sink.ts';

const sinks = new WeakMap<GatewayContext, UsageBuffer>();
const timers = new WeakMap<GatewayContext, PruneTimer>();
const requestLogs = new WeakMap<GatewayContext, RequestLogs>();

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
  /** Prompt-cache writes (part of input_tokens, like cached_tokens) and their 1-hour share. */
  cache_write_tokens: r.cache_write_tokens ?? 0,
  cache_write_1h_tokens: r.cache_write_1h_tokens ?? 0,
  images: r.images,
  seconds: r.seconds,
  credits: r.credits,
  /** The cost at the base price; credits − base_credits is the city's margin (older records: = credits). */
  base_credits: r.base_credits ?? r.credits,
  margin_credits: r.credits - (r.base_credits ?? r.credits),
  /** The alias the caller asked for (model is the model it names), or null. */
  alias: r.alias ?? null,
  duration_ms: r.duration_ms,
  upstream: r.upstream ?? null,
  attempts: r.attempts ?? null,
  overhead_ms: r.overhead_ms ?? null,
  created_at: new Date(r.created_at).toISOString(),
  /** The upstream reported no usage: the tokens are citygate's estimate (docs/money.md). */
  estimated: r.estimated === 1,
  /** A remark on the call, e.g. hosted tools a translated call left out. */
  note: r.note ?? null,
  /** The user API key the call was made with (accounts/keys), or null. */
  key_id: r.key_id ?? null,
});

/** A user API key's id (as in its prefix cg_key_<id>; the prefix is accepted too). */
const keyIdFilter = z
  .string()
  .trim()
  .regex(/^(cg_key_)?[a-z0-9]{12}$/, 'a key id (12 of a-z, 0-9)')
  .transform((s) => s.replace(/^cg_key_/, ''));

/** A time bound: epoch ms, or an ISO date / date-time. */
const timeBound = z
  .union([z.coerce.number().int().min(0), z.iso.date(), z.iso.datetime({ offset: true })])
  .transform((v) => (typeof v === 'number' ? v : Date.parse(v)));

/** The filters of usage/list and usage/export (one set: an export is the list, streamed). */
const recordFilters = {
  city_id: cityIdSchema.optional(),
  user_id: z.string().min(1).max(200).optional(),
  model: z.string().max(200).optional(),
  mode: z.string().max(40).optional().describe("the call's mode, e.g. chat, embeddings; 'mcp': tool calls through /v1/mcp"),
  status: z.enum(['ok', 'error', 'aborted']).optional(),
  key_id: keyIdFilter.optional().describe('records of calls made with this API key'),
  from: timeBound.optional(),
  to: timeBound.optional(),
};

/** The usage records those filters select (cityId already scoped to the caller). */
function filteredRecords(gateway: GatewayContext, cityId: string | undefined, f: { user_id?: string; model?: string; mode?: string; status?: 'ok' | 'error' | 'aborted'; key_id?: string; from?: number; to?: number }) {
  let q = gateway.db.kysely.selectFrom('usage').selectAll();
  if (cityId) q = q.where('city_id', '=', cityId);
  if (f.user_id) q = q.where('user_id', '=', f.user_id);
  if (f.key_id) q = q.where('key_id', '=', f.key_id);
  if (f.model) q = q.where('model', '=', f.model);
  if (f.mode) q = q.where('mode', '=', f.mode);
  if (f.status) q = q.where('status', '=', f.status);
  if (f.from !== undefined) q = q.where('created_at', '>=', f.from);
  if (f.to !== undefined) q = q.where('created_at', '<', f.to);
  return q;
}

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
  cache_write_tokens: z.number().int(),
  credits: z.number().int(),
  base_credits: z.number().int().describe('the cost at the base price'),
  margin_credits: z.number().int().describe('credits − base_credits: what the city prices added'),
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
  gateway: GatewayContext,
  q: SelectQueryBuilder<Schema, 'usage', Selectable<UsageTable>>,
  cursor: string | undefined,
  limit: number,
  from?: number,
  to?: number,
): Promise<{ items: ReturnType<typeof toUsage>[]; next_cursor: string | null }> {
  const c = parseCursor(cursor);
  // spelled with a plain upper bound on created_at, which PostgreSQL can prune day tables by
  if (c) q = q.where('created_at', '<=', c[0]).where((eb) => eb.or([eb('created_at', '<', c[0]), eb('seq', '<', c[1])]));
  const ordered = q.orderBy('created_at', 'desc').orderBy('seq', 'desc');
  const at = Math.min(c ? c[0] + 1 : Infinity, to ?? Infinity);
  const rows = (await isPartitioned(gateway.db))
    ? await newestFirst(ordered, Number.isFinite(at) ? at : Date.now(), limit + 1, from)
    : await ordered.limit(limit + 1).execute();
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return { items: items.map(toUsage), next_cursor: rows.length > limit ? `${last.created_at}_${last.seq}` : null };
}

/**
 * PostgreSQL's day tables: a page with no time bound would plan and open every day table (~100
 * at 90 days: 30 ms of planning alone on a busy machine). So the page is read in time windows
 * going back from `at` (the newest day, then the week, the month, the rest), each one planned
 * over its few day tables only, until it holds `n` records. Same rows, same order.
 */
async function newestFirst<T>(q: SelectQueryBuilder<Schema, 'usage', T>, at: number, n: number, from = 0): Promise<T[]> {
  const DAY = 86_400_000;
  const edges = [at - DAY, at - 8 * DAY, at - 31 * DAY, -Infinity];
  const out: T[] = [];
  let hi = Infinity;
  for (const lo of edges) {
    let w = q;
    if (lo > -Infinity) w = w.where('created_at', '>=', lo);
    if (hi < Infinity) w = w.where('created_at', '<', hi);
    out.push(...(await w.limit(n - out.length).execute()));
    if (out.length >= n || lo <= from) break;
    hi = lo;
  }
  return out;
}

export const usageService = defineService({
  id: 'usage',
  name: 'Usage',
  description: 'One record per AI call, and daily totals per city and model.',
  env: [
    { key: 'USAGE_FLUSH_MS', description: 'How long records wait in memory before a batch write (default 250; a Worker writes them after each request).', required: false },
    { key: 'USAGE_BATCH_SIZE', description: 'Records per batch write (default 500).', required: false },
    { key: 'USAGE_RETENTION_DAYS', description: `Days usage records are kept (default ${DEFAULT_RETENTION_DAYS}; 0 keeps them forever). Totals live on in the hourly rollup; the ledger is never pruned.`, required: false },
    { key: 'USAGE_ROLLUP_RETENTION_DAYS', description: 'Days the hourly rollup (summary, stats, overview) is kept (default 0: forever).', required: false },
    { key: 'USAGE_PRUNE_BATCH', description: 'Records per DELETE of a retention pass (default SQLite 50, PostgreSQL and D1 1000; PostgreSQL drops its day tables whole and deletes in batches only from its DEFAULT partition).', required: false },
    { key: 'USAGE_PRUNE_PACE', description: 'The pause after each batch of a retention pass, as a multiple of the time the batch took (default 9: a tenth of the time deleting). Lower prunes faster at some cost in latency (SQLite at 50M records: 9 → ~470 records/s, p99 within 3 %; 3 → ~1,270/s, p99 +8.5 %).', required: false },
    { key: 'REQUEST_LOG', description: "Request logs of AI calls: 'off' (default), 'metadata' (method, path, model, status, headers with secrets redacted, sizes, timings) or 'full' (also the request and response bodies, redacted, 64 KiB each, in blob storage). A city's request_log setting (cities/update) overrides it.", required: false },
    { key: 'REQUEST_LOG_RETENTION_DAYS', description: `Days request logs and their bodies are kept (default ${DEFAULT_REQUEST_LOG_RETENTION_DAYS}; 0 keeps them forever).`, required: false },
    { key: 'USAGE_PRUNE_DELAY_S', description: 'Seconds from boot to the first retention pass of a Node process (default 60; then hourly).', required: false },
  ],
  init(gw) {
    const sink = new UsageBuffer(gw);
    sinks.set(gw, sink);
    gw.provide(METERING, sink);
    const logs = new RequestLogs(gw);
    requestLogs.set(gw, logs);
    gw.provide(REQUEST_LOGS, logs);
    if (gw.config.gracefulStop) {
      // a long-lived process prunes on its own timer; a Worker from its scheduled handler
      const timer = new PruneTimer(gw);
      timers.set(gw, timer);
      const delay = Number(gw.env.get('USAGE_PRUNE_DELAY_S') ?? 60);
      timer.start(Number.isFinite(delay) && delay >= 0 ? delay * 1000 : 60_000);
    }
  },
  async maintain(gw) {
    await prune(gw);
  },
  async stop(gw) {
    await timers.get(gw)?.stop();
    await sinks.get(gw)?.stop();
    await requestLogs.get(gw)?.stop();
  },
  actions: {
    me: action({
      method: 'GET',
      auth: ['user'],
      summary: 'Usage records of the calling user, newest first',
      input: z.object({ city_id: z.string().optional(), model: z.string().max(200).optional(), mode: z.string().max(40).optional(), key_id: keyIdFilter.optional(), ...pageQuery }),
      handler: async ({ gateway, identity, input }) => {
        const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
        let q = gateway.db.kysely.selectFrom('usage').selectAll().where('city_id', '=', cityId).where('user_id', '=', userId);
        if (input.model) q = q.where('model', '=', input.model);
        if (input.mode) q = q.where('mode', '=', input.mode);
        if (input.key_id) q = q.where('key_id', '=', input.key_id);
        return page(gateway, q, input.cursor, input.limit);
      },
    }),
    'me/daily': meDailyAction,
    list: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Usage records, newest first (filters: city, user, model, status, from, to)',
      input: z.object({ ...recordFilters, ...pageQuery }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id);
        return page(gateway, filteredRecords(gateway, cityId, input), input.cursor, input.limit, input.from, input.to);
      },
    }),
    export: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Usage records as a download, oldest first: NDJSON or CSV, streamed (filters as usage/list)',
      input: z.object({ ...recordFilters, format: z.enum(['ndjson', 'csv']).default('ndjson') }),
      handler: ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id);
        const q = filteredRecords(gateway, cityId, input);
        const name = `citygate-usage${cityId ? `-${cityId}` : ''}-${new Date().toISOString().slice(0, 10)}`;
        return exportResponse(gateway, q, input.format, toUsage, name);
      },
    }),
    'request-log': action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: "One AI call's request log (REQUEST_LOG or the city's request_log): headers, sizes, timings, and in full mode the bodies, secrets redacted",
      description: 'By request_id (the x-request-id of the call) or by the usage_id of its usage record. A bureau reads its own city\'s logs only (404 for any other).',
      input: z.object({ request_id: z.string().min(1).max(100).optional(), usage_id: z.string().min(1).max(100).optional() }),
      output: requestLogOutput,
      handler: ({ gateway, identity, input }) => readRequestLog(gateway, identity, input),
    }),
    summary: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Totals per day × city × model over a date range (UTC days, both ends included), a page at a time; totals over the whole range',
      input: z.object({
        from: day.optional(),
        to: day.optional(),
        city_id: cityIdSchema.optional(),
        model: z.string().max(200).optional(),
        cursor: z.string().max(600).optional(),
        limit: z.coerce.number().int().min(1).max(SUMMARY_MAX_LIMIT).default(SUMMARY_LIMIT),
      }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id);
        const { from, to } = dayRange(input, Infinity);
        return summaryPage(gateway, { from, to, cityId, model: input.model, cursor: input.cursor, limit: input.limit });
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
        key_id: keyIdFilter.optional().describe('calls made with this API key (summed from its records, not the rollup)'),
        group: statsGroup,
      }),
      output: statsOutput,
      handler: async ({ gateway, identity, input }) => {
        const f = { from: input.from, to: input.to, cityId: scopeCity(identity, input.city_id), model: input.model, group: input.group };
        return input.key_id ? keyUsageStats(gateway, { ...f, keyId: input.key_id }) : usageStats(gateway, f);
      },
    }),
  },
});
