// Admin actions ai/upstreams/list|create|update|remove. The api_key is write-only: the list
// shows has_key and the last 4 characters (of keys of 12+ characters) only.
import { z } from 'zod';
import { badRequest, notFound } from '../../../kernel/errors.ts';
import { action } from '../../../kernel/service.ts';
import type { GatewayContext } from '../../../kernel/context.ts';
import { registryOf } from '../state.ts';
import { healthOf } from './health.ts';
import { builtinUpstream, createInput, defaultBaseUrl, publicView, updateInput, upstreamTableOf, type Upstream } from './upstreams.ts';

const view = z
  .object({
    upstream_id: z.string(),
    name: z.string(),
    kind: z.string(),
    base_url: z.string(),
    has_key: z.boolean(),
    key_last4: z.string().nullable(),
    models: z.array(z.union([z.string(), z.object({ id: z.string(), upstream_model: z.string() })])),
    weight: z.number(),
    priority: z.number(),
    enabled: z.boolean(),
    timeout_ms: z.number().nullable(),
    builtin: z.boolean().describe('an env slot (TEXTPROVIDER_*, OPENAI_*, …): change it with env/upsert'),
    state: z.record(z.string(), z.enum(['cooling_down', 'half_open'])).describe('models of this upstream not healthy now, in the process that answered'),
  })
  .loose();

const show = (gw: GatewayContext, u: Upstream) => publicView(u, healthOf(gw).upstreamState(u.id));

/** The env slots as upstreams, with the models registered for each. */
function builtins(gw: GatewayContext): Upstream[] {
  const reg = registryOf(gw);
  const models = reg.all(gw.env);
  return [...reg.providers.values()].map((slot) => builtinUpstream(gw.env, slot, models.filter((m) => m.provider === slot.id)));
}

const idInput = z.object({ upstream_id: z.string().min(1).max(64) }).strict();

const notEditable = (id: string) => badRequest('builtin_upstream', `'${id}' is an env slot: change it with env/upsert.`, 'upstream_id');

export const upstreamActions = {
  'upstreams/list': action({
    method: 'GET',
    auth: ['admin'],
    summary: 'List upstreams (env slots as built-in ones); keys are never shown',
    output: z.object({ items: z.array(view) }),
    handler: async ({ gateway: gw }) => {
      const table = upstreamTableOf(gw);
      await table.refresh();
      return { items: [...builtins(gw), ...table.rows].map((u) => show(gw, u)) };
    },
  }),
  'upstreams/create': action({
    method: 'POST',
    auth: ['admin'],
    summary: 'Add an upstream (takes effect at once)',
    input: createInput,
    output: view,
    handler: async ({ gateway: gw, input }) => {
      if (!input.base_url && !defaultBaseUrl(input.kind)) throw badRequest('invalid_input', 'base_url: required for kind openai-compatible', 'base_url');
      return show(gw, await upstreamTableOf(gw).create(input));
    },
  }),
  'upstreams/update': action({
    method: 'POST',
    auth: ['admin'],
    summary: 'Change an upstream (only the given fields; api_key null removes the key)',
    input: updateInput,
    output: view,
    handler: async ({ gateway: gw, input }) => {
      if (input.upstream_id.startsWith('env:')) throw notEditable(input.upstream_id);
      const u = await upstreamTableOf(gw).update(input);
      if (!u) throw notFound('upstream_not_found', `No upstream '${input.upstream_id}'.`, 'upstream_id');
      healthOf(gw).reset(u.id); // a changed upstream starts with a clean record
      return show(gw, u);
    },
  }),
  'upstreams/remove': action({
    method: 'POST',
    auth: ['admin'],
    summary: 'Remove an upstream (takes effect at once)',
    input: idInput,
    output: z.object({ upstream_id: z.string(), removed: z.literal(true) }),
    handler: async ({ gateway: gw, input }) => {
      if (input.upstream_id.startsWith('env:')) throw notEditable(input.upstream_id);
      if (!(await upstreamTableOf(gw).remove(input.upstream_id))) throw notFound('upstream_not_found', `No upstream '${input.upstream_id}'.`, 'upstream_id');
      healthOf(gw).reset(input.upstream_id);
      return { upstream_id: input.upstream_id, removed: true as const };
    },
  }),
};
