// Admin actions ai/models/list|create|update|remove: models as data (models-table.ts). A write
// takes effect at once in this process and within about 2 s everywhere (the upstreams' refresh).
// Built-in models (catalog, env slots, citygate.config.ts) are read-only: a database model with
// the same id replaces one (its unset fields are the built-in's), and disabling it hides it.
import { z } from 'zod';
import { badRequest, conflict, notFound } from '../../../kernel/errors.ts';
import { action } from '../../../kernel/service.ts';
import type { GatewayContext } from '../../../kernel/context.ts';
import { registryOf } from '../state.ts';
import { candidatesOf } from '../routing/route.ts';
import { upstreamTableOf } from '../routing/upstreams.ts';
import { modesOf, priceSourceOf, pricesOf } from './prices.ts';
import { createModelInput, modelIdSchema, modelTableOf, updateModelInput, type CreateModelInput, type ModelRow, type UpdateModelInput } from './models-table.ts';
import { allModels, builtinModel } from './resolve.ts';
import type { ModelDef } from './registry.ts';

const view = z
  .object({
    model_id: z.string(),
    name: z.string(),
    description: z.string(),
    modes: z.array(z.string()).describe('the modes callers may use now (MODEL_MODES narrows them)'),
    provider: z.string().nullable(),
    upstream_model: z.string(),
    prices: z.record(z.string(), z.number()).nullable().describe('base prices in credits; null: free'),
    price_source: z.string().nullable(),
    max_output_tokens: z.number().nullable(),
    context_window: z.number().nullable(),
    aliases: z.array(z.string()),
    enabled: z.boolean(),
    source: z.enum(['database', 'builtin']),
    replaces_builtin: z.boolean().describe('a database model over a built-in model of the same id'),
    available: z.boolean().describe('an enabled upstream serves it now'),
    env_requirements: z.array(z.object({ key: z.string(), description: z.string(), required: z.boolean() })).describe('the env keys of its env slot, if any'),
    upstreams: z.array(z.string()),
  })
  .loose();

/** A database model's view: its row over the built-in model of the same id, if any. */
function showRow(gw: GatewayContext, table: ReturnType<typeof modelTableOf>, row: ModelRow) {
  return show(gw, table.model(row, registryOf(gw).find(gw.env, row.id)), row);
}

function show(gw: GatewayContext, m: ModelDef, row?: ModelRow) {
  const enabled = row ? row.enabled : true;
  return {
    model_id: m.id,
    name: m.name,
    description: m.description ?? '',
    modes: modesOf(gw, m),
    provider: m.provider || null,
    upstream_model: m.upstream,
    prices: pricesOf(gw, m) as Record<string, number> | null,
    price_source: priceSourceOf(gw, m),
    max_output_tokens: m.maxOutputTokens ?? null,
    context_window: m.contextWindow ?? null,
    aliases: m.aliases ?? [],
    enabled,
    source: row ? ('database' as const) : ('builtin' as const),
    replaces_builtin: row ? registryOf(gw).find(gw.env, m.id) !== undefined : false,
    available: enabled && candidatesOf(gw, m).length > 0,
    env_requirements: m.provider && registryOf(gw).providers.has(m.provider) ? registryOf(gw).requirements(m) : [],
    upstreams: enabled ? candidatesOf(gw, m).map((u) => u.id) : [],
    ...(row ? { created_at: new Date(row.createdAt).toISOString(), updated_at: new Date(row.updatedAt).toISOString() } : {}),
  };
}

/** Every model: the callable ones, then disabled database models (as their row makes them). */
function listed(gw: GatewayContext) {
  const table = modelTableOf(gw);
  const out = allModels(gw).map((m) => show(gw, m, table.row(m.id)));
  for (const row of table.rows) if (!row.enabled) out.push(showRow(gw, table, row));
  return out;
}

/** What would be wrong with these fields: a 400 or 409 naming the field. */
function check(gw: GatewayContext, input: CreateModelInput | UpdateModelInput) {
  if (input.provider && !registryOf(gw).providers.has(input.provider)) {
    throw badRequest('invalid_input', `provider: no env slot '${input.provider}' (one of: ${[...registryOf(gw).providers.keys()].join(', ')})`, 'provider');
  }
  const table = modelTableOf(gw);
  for (const a of input.aliases ?? []) {
    if (a === input.model_id) throw badRequest('invalid_input', `aliases: '${a}' is the model's own id`, 'aliases');
    if (table.row(a)) throw conflict('alias_taken', `aliases: '${a}' is the id of a database model.`, 'aliases');
    const other = table.rows.find((r) => r.id !== input.model_id && r.aliases.includes(a));
    if (other) throw conflict('alias_taken', `aliases: '${a}' is an alias of '${other.id}'.`, 'aliases');
  }
}

const removeInput = z.strictObject({ model_id: modelIdSchema });

const readOnly = (id: string) =>
  badRequest('builtin_model', `'${id}' is a built-in model (catalog, env or citygate.config.ts): read-only; ai/models/create with its id replaces it.`, 'model_id');

export const modelActions = {
  'models/list': action({
    method: 'GET',
    auth: ['admin'],
    summary: 'Every model, built-in and database ones (disabled ones too), with base prices and aliases',
    output: z.object({ items: z.array(view) }),
    handler: async ({ gateway: gw }) => {
      await upstreamTableOf(gw).refresh();
      return { items: listed(gw) };
    },
  }),
  'models/create': action({
    method: 'POST',
    auth: ['admin'],
    summary: 'Add a model, or replace a built-in one of the same id (takes effect at once; every process within about 2 s)',
    input: createModelInput,
    output: view,
    errors: [409],
    handler: async ({ gateway: gw, input }) => {
      const ups = upstreamTableOf(gw);
      await ups.refresh();
      const table = modelTableOf(gw);
      if (table.row(input.model_id)) throw conflict('model_exists', `A database model '${input.model_id}' exists: change it with ai/models/update.`, 'model_id');
      if (table.byAlias(input.model_id)) throw conflict('alias_taken', `'${input.model_id}' is an alias of '${table.byAlias(input.model_id)!.id}'.`, 'model_id');
      if (!input.modes && !builtinModel(gw, input.model_id)) throw badRequest('invalid_input', 'modes: required for a model that replaces no built-in one', 'modes');
      check(gw, input);
      if (!(await table.create(gw, input))) throw conflict('model_exists', `A database model '${input.model_id}' exists.`, 'model_id');
      await ups.reload();
      return showRow(gw, table, table.row(input.model_id)!);
    },
  }),
  'models/update': action({
    method: 'POST',
    auth: ['admin'],
    summary: 'Change a database model (only the given fields; null: back to the built-in value or the default)',
    input: updateModelInput,
    output: view,
    handler: async ({ gateway: gw, input }) => {
      const ups = upstreamTableOf(gw);
      await ups.refresh();
      const table = modelTableOf(gw);
      if (!table.row(input.model_id)) throw builtinModel(gw, input.model_id) ? readOnly(input.model_id) : notFound('model_not_found', `No model '${input.model_id}'.`, 'model_id');
      check(gw, input);
      if (!(await table.update(gw, input))) throw notFound('model_not_found', `No model '${input.model_id}'.`, 'model_id');
      await ups.reload();
      return showRow(gw, table, table.row(input.model_id)!);
    },
  }),
  'models/remove': action({
    method: 'POST',
    auth: ['admin'],
    summary: 'Remove a database model (a built-in one it replaced comes back)',
    input: removeInput,
    output: z.object({ model_id: z.string(), removed: z.literal(true) }),
    handler: async ({ gateway: gw, input }) => {
      const ups = upstreamTableOf(gw);
      if (!(await modelTableOf(gw).remove(gw, input.model_id))) {
        await ups.refresh();
        throw builtinModel(gw, input.model_id) ? readOnly(input.model_id) : notFound('model_not_found', `No model '${input.model_id}'.`, 'model_id');
      }
      await ups.reload();
      return { model_id: input.model_id, removed: true as const };
    },
  }),
};
