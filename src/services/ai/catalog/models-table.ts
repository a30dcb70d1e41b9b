// Models as data: the ai_models table (ai/models/*), its admin input schemas, and a
// per-process snapshot the hot path reads synchronously. The snapshot is loaded together with
// the upstreams' (routing/upstreams.ts, UpstreamTable.refresh): one refresh, one 2 s rule, so an
// upstream naming a new model and the model itself reach every process together.
//
// A row may replace a built-in model of the same id (catalog, env slot, citygate.config.ts):
// its NULL fields are the built-in's (so `{model_id, aliases}` only adds aliases to a built-in
// model), and a disabled row hides the built-in. A row that replaces nothing serves through
// the upstreams that name it (ai/upstreams/*) or the env slot it names (`provider`).
import { z } from 'zod';
import type { GatewayContext } from '../../../kernel/context.ts';
import type { Prices } from '../../../kernel/metering.ts';
import { pricesSchema } from '../../../kernel/city-settings.ts';
import type { AiModelsTable } from '../../../db/schema.ts';
import { chatModes, MODES, type Mode, type ModelDef } from './registry.ts';

// ---- input -----------------------------------------------------------------------------

export const modelIdSchema = z
  .string()
  .trim()
  .min(1)
  .max(256)
  .regex(/^[^\s\u0000-\u001f"'<>\\]+$/, 'no spaces, quotes or control characters');

const unique = <T>(a: T[]) => new Set(a).size === a.length;

const fields = {
  name: z.string().trim().min(1).max(200),
  description: z.string().max(2000),
  modes: z
    .array(z.enum(MODES, { message: `must be one of: ${MODES.join(', ')}` }))
    .min(1, { message: 'must name at least one mode' })
    .refine(unique, { message: 'must not repeat a mode' }),
  provider: z.string().min(1).max(64).describe('an env slot (textprovider, openai, anthropic, google, or one of citygate.config.ts) that serves it'),
  upstream_model: z.string().trim().min(1).max(256).describe('the model id sent upstream (default: the id)'),
  prices: pricesSchema.describe('null: the built-in or catalog price (else free); {}: free'),
  max_output_tokens: z.number().int().min(1).max(10_000_000),
  context_window: z.number().int().min(1).max(100_000_000),
  aliases: z.array(modelIdSchema).max(50).refine(unique, { message: 'must not repeat an alias' }),
  enabled: z.boolean(),
};

/** The fields create and update share: null (or absent) means the built-in value or the default. */
const nullableFields = {
  model_id: modelIdSchema,
  name: fields.name.nullish(),
  description: fields.description.nullish(),
  modes: fields.modes.nullish(),
  provider: fields.provider.nullish(),
  upstream_model: fields.upstream_model.nullish(),
  prices: fields.prices.nullish(),
  max_output_tokens: fields.max_output_tokens.nullish(),
  context_window: fields.context_window.nullish(),
};

export const createModelInput = z.strictObject({ ...nullableFields, aliases: fields.aliases.default([]), enabled: fields.enabled.default(true) });

export const updateModelInput = z.strictObject({ ...nullableFields, aliases: fields.aliases.optional(), enabled: fields.enabled.optional() });

export type CreateModelInput = z.output<typeof createModelInput>;
export type UpdateModelInput = z.output<typeof updateModelInput>;

// ---- rows ------------------------------------------------------------------------------

/** One ai_models row, parsed once per refresh. */
export interface ModelRow {
  /** The row's columns as read, to tell an unchanged row at the next refresh. */
  raw: string;
  id: string;
  name: string | null;
  description: string | null;
  modes: Mode[] | null;
  provider: string | null;
  upstream: string | null;
  /** undefined: the built-in's or the catalog's price. */
  prices: Prices | undefined;
  maxOutputTokens: number | null;
  contextWindow: number | null;
  aliases: string[];
  enabled: boolean;
  createdAt: number;
  updatedAt: number;
}

function json<T>(text: string | null, fallback: T): T {
  if (text === null) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback; // a row written by hand: as if unset
  }
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

const rawOf = (r: AiModelsTable) =>
  [r.name, r.description, r.modes, r.provider, r.upstream_model, r.prices, r.max_output_tokens, r.context_window, r.aliases, r.enabled, r.updated_at].join('\u0000');

export function fromModelRow(r: AiModelsTable): ModelRow {
  const modes = json<unknown>(r.modes, null);
  const prices = json<unknown>(r.prices, null);
  const aliases = json<unknown>(r.aliases, []);
  return {
    raw: rawOf(r),
    id: r.model_id,
    name: r.name,
    description: r.description,
    modes: Array.isArray(modes) ? (modes.filter((m) => (MODES as readonly string[]).includes(m)) as Mode[]) : null,
    provider: r.provider,
    upstream: r.upstream_model,
    prices: prices && typeof prices === 'object' && !Array.isArray(prices) ? (prices as Prices) : undefined,
    maxOutputTokens: num(r.max_output_tokens),
    contextWindow: num(r.context_window),
    aliases: Array.isArray(aliases) ? aliases.filter((a): a is string => typeof a === 'string') : [],
    enabled: Number(r.enabled) === 1,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

/** The model a row makes, over the built-in model of its id if there is one. */
function makeModel(row: ModelRow, b: ModelDef | undefined): ModelDef {
  const m: ModelDef = {
    id: row.id,
    name: row.name ?? b?.name ?? row.id,
    description: row.description ?? b?.description ?? '',
    tags: b?.tags ?? [],
    meta: b?.meta ?? {},
    modes: row.modes ?? b?.modes ?? chatModes,
    provider: row.provider ?? b?.provider ?? '',
    upstream: row.upstream ?? b?.upstream ?? row.id,
    aliases: row.aliases,
    source: 'database',
  };
  const prices = row.prices !== undefined ? row.prices : b?.prices;
  if (prices !== undefined) m.prices = prices;
  const max = row.maxOutputTokens ?? b?.maxOutputTokens;
  if (max) m.maxOutputTokens = max;
  const ctx = row.contextWindow ?? b?.contextWindow;
  if (ctx) m.contextWindow = ctx;
  return m;
}

// ---- the per-process snapshot ------------------------------------------------------------

export class ModelTable {
  #rows = new Map<string, ModelRow>();
  /** alias → the enabled row it names */
  #aliases = new Map<string, ModelRow>();
  /** The model made from a row and the built-in it replaced, kept while neither changes. */
  #made = new WeakMap<ModelRow, { b: ModelDef | undefined; m: ModelDef }>();

  get size(): number {
    return this.#rows.size;
  }

  get rows(): ModelRow[] {
    return [...this.#rows.values()];
  }

  /** The row of this id (enabled or not). */
  row(id: string): ModelRow | undefined {
    return this.#rows.get(id);
  }

  /** The enabled row an alias names. */
  byAlias(alias: string): ModelRow | undefined {
    return this.#aliases.get(alias);
  }

  /** The row as a model, over `builtin` (the registry's model of the same id, if any). */
  model(row: ModelRow, builtin: ModelDef | undefined): ModelDef {
    const hit = this.#made.get(row);
    if (hit && hit.b === builtin) return hit.m;
    const m = makeModel(row, builtin);
    this.#made.set(row, { b: builtin, m });
    return m;
  }

  set(rows: AiModelsTable[]): void {
    const byId = new Map<string, ModelRow>();
    const aliases = new Map<string, ModelRow>();
    for (const r of rows) {
      // an unchanged row keeps its object, so the models made from it stay cached
      const old = this.#rows.get(r.model_id);
      const row = old && old.raw === rawOf(r) ? old : fromModelRow(r);
      byId.set(row.id, row);
    }
    for (const row of byId.values()) if (row.enabled) for (const a of row.aliases) if (!byId.has(a) && !aliases.has(a)) aliases.set(a, row);
    this.#rows = byId;
    this.#aliases = aliases;
  }

  // ---- writes (the caller refreshes the snapshot afterwards) ----

  async create(gw: GatewayContext, input: CreateModelInput): Promise<boolean> {
    const t = Date.now();
    const r = await gw.db.kysely
      .insertInto('ai_models')
      .values({ model_id: input.model_id, ...columns(input), aliases: JSON.stringify(input.aliases), enabled: input.enabled ? 1 : 0, created_at: t, updated_at: t })
      .onConflict((oc) => oc.column('model_id').doNothing())
      .executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async update(gw: GatewayContext, input: UpdateModelInput): Promise<boolean> {
    const set: Partial<AiModelsTable> = { ...columns(input), updated_at: Date.now() };
    if (input.aliases !== undefined) set.aliases = JSON.stringify(input.aliases);
    if (input.enabled !== undefined) set.enabled = input.enabled ? 1 : 0;
    const r = await gw.db.kysely.updateTable('ai_models').set(set).where('model_id', '=', input.model_id).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async remove(gw: GatewayContext, id: string): Promise<boolean> {
    const r = await gw.db.kysely.deleteFrom('ai_models').where('model_id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }
}

/** The nullable columns the input gives (undefined: left as they are; null: back to the built-in's). */
function columns(i: UpdateModelInput | CreateModelInput): Partial<AiModelsTable> {
  const c: Partial<AiModelsTable> = {};
  if (i.name !== undefined) c.name = i.name;
  if (i.description !== undefined) c.description = i.description;
  if (i.modes !== undefined) c.modes = i.modes === null ? null : JSON.stringify(i.modes);
  if (i.provider !== undefined) c.provider = i.provider;
  if (i.upstream_model !== undefined) c.upstream_model = i.upstream_model;
  if (i.prices !== undefined) c.prices = i.prices === null ? null : JSON.stringify(i.prices);
  if (i.max_output_tokens !== undefined) c.max_output_tokens = i.max_output_tokens;
  if (i.context_window !== undefined) c.context_window = i.context_window;
  return c;
}

const tables = new WeakMap<GatewayContext, ModelTable>();

export function modelTableOf(gw: GatewayContext): ModelTable {
  let t = tables.get(gw);
  if (!t) tables.set(gw, (t = new ModelTable()));
  return t;
}
