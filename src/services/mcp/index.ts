// mcp: a city's MCP servers as data (mcp/servers/*: the admin, or a bureau for its own city),
// and citygate as one MCP server for the city's users at /v1/mcp (endpoint.ts), whose tools
// are the allowed tools of the city's enabled servers, each call limited, held, charged once,
// recorded, traced and counted like a model call (call.ts). See docs/mcp.md.
import { z } from 'zod';
import type { GatewayContext } from '../../kernel/context.ts';
import { newId } from '../../kernel/crypto.ts';
import { badRequest, conflict, GatewayError, notFound } from '../../kernel/errors.ts';
import { boundCity, type Identity } from '../../kernel/identity.ts';
import { checkUrl, outboundRules, UnreadableUrl } from '../../kernel/outbound/policy.ts';
import { action, defineService } from '../../kernel/service.ts';
import { isUniqueViolation } from '../../db/database.ts';
import { cityIdSchema, requireCity } from '../cities/index.ts';
import { breakerOf, breakerKey } from './breaker.ts';
import { filterOf, serverFields, serverName, serverView, toView } from './input.ts';
import { forgetCity, getServer, listServers, openAuth, sealAuth, type ServerRow } from './store.ts';
import { loadedSdk, sdk } from './sdk.ts';
import { priceOf, SEPARATOR, toolAllowed } from './tool-rules.ts';

/** The server URL as the outbound policy judges it before any connection; a 400 otherwise. */
function checkServerUrl(gw: GatewayContext, raw: string, param = 'url'): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest('invalid_url', `${param} is not a URL.`, param);
  }
  try {
    checkUrl(url, outboundRules(gw.env));
  } catch (e) {
    if (e instanceof UnreadableUrl) throw badRequest('url_refused', `${param} is refused: ${e.message} (an operator can allow private addresses with AI_FETCH_ALLOW_PRIVATE).`, param);
    throw e;
  }
  if (url.username || url.password) throw badRequest('invalid_url', `${param} must not carry credentials (give them in auth).`, param);
  return url.href;
}

/** The city an admin or bureau acts on: a bureau only its own. */
function scopedCity(identity: Identity, cityId: string | undefined): string | undefined {
  return boundCity(identity) ?? cityId;
}

/** A server the caller may manage, or 404 (a bureau does not learn of other cities' servers). */
async function serverFor(gw: GatewayContext, identity: Identity, serverId: string): Promise<ServerRow> {
  const row = await getServer(gw, serverId);
  const bound = boundCity(identity);
  if (!row || (bound && row.city_id !== bound)) throw notFound('server_not_found', `No MCP server '${serverId}'.`, 'server_id');
  return row;
}

/** Forget what this process keeps of a server (its client, its tool list, its city's rows, its breaker). */
function forget(gw: GatewayContext, row: ServerRow): void {
  forgetCity(row.city_id);
  const room = loadedSdk(); // not loaded: no client or tool list of it in this process
  room?.forgetTools(row.server_id);
  room?.dropServer(row.server_id);
  breakerOf(gw).reset(breakerKey(row).split('\u0000')[0]);
}

const view = async (gw: GatewayContext, r: ServerRow) => toView(r, await openAuth(gw, r));

const f = serverFields;
const createInput = z.object({
  city_id: cityIdSchema.optional(),
  name: serverName,
  url: f.url,
  description: f.description.default(''),
  auth: f.auth.default({ type: 'none' }),
  allowed_tools: f.allowed_tools.optional(),
  denied_tools: f.denied_tools.optional(),
  price: f.price.default(0),
  prices: f.prices.default({}),
  timeout_ms: f.timeout_ms.default(30_000),
  enabled: f.enabled.default(true),
});
const updateInput = z.object({
  server_id: z.string().min(1).max(100),
  name: serverName.optional(),
  url: f.url.optional(),
  description: f.description.optional(),
  auth: f.auth.optional(),
  allowed_tools: f.allowed_tools.optional(),
  denied_tools: f.denied_tools.optional(),
  price: f.price.optional(),
  prices: f.prices.optional(),
  timeout_ms: f.timeout_ms.optional(),
  enabled: f.enabled.optional(),
});

const testedTool = z.object({ name: z.string(), exposed_as: z.string(), description: z.string().nullable(), allowed: z.boolean(), price: z.number() });
const testOutput = z.object({
  ok: z.boolean(),
  server_id: z.string(),
  latency_ms: z.number(),
  server_info: z.object({ name: z.string(), version: z.string() }).nullable(),
  protocol_version: z.string().nullable(),
  tools: z.array(testedTool),
  error: z.string().nullable(),
});

export const mcpService = defineService({
  id: 'mcp',
  name: 'MCP',
  description: "MCP servers per city, and citygate as one MCP server (/v1/mcp) for the city's users: their allowed tools, limited, charged and recorded per call.",
  stop: async () => loadedSdk()?.closeAll(),
  actions: {
    '': action({
      method: 'POST',
      auth: ['user'],
      body: 'raw',
      requestLog: {},
      credentialHeader: 'x-api-key',
      summary: 'The MCP endpoint (Streamable HTTP, stateless): tools/list and tools/call of the city\'s servers',
      description:
        "An MCP server for the city's users: send JSON-RPC (initialize, tools/list, tools/call) with the user's token or key as Bearer. Tools are `<server>__<tool>`; each call costs its price in credits. GET (the server-initiated stream) is not offered: 405.",
      produces: ['application/json'],
      errors: [402, 429, 502, 504],
      formatError: (e) => e.toResponse(e.status === 401 ? { 'www-authenticate': 'Bearer realm="citygate"' } : undefined),
      handler: async (ctx) => (await sdk()).serveMcp(ctx),
    }),
    'servers/create': action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: "Add an MCP server to a city (its credentials sealed at rest, never shown again)",
      input: createInput,
      output: serverView,
      errors: [409],
      handler: async ({ gateway, identity, input }) => {
        const city = scopedCity(identity, input.city_id);
        if (!city) throw badRequest('missing_city', 'city_id is required.', 'city_id');
        await requireCity(gateway, city, identity);
        const url = checkServerUrl(gateway, input.url);
        if (input.auth.type === 'oauth') checkServerUrl(gateway, input.auth.token_url, 'auth.token_url');
        const filter = filterOf(input.allowed_tools, input.denied_tools) ?? { tool_filter: 'all', tools: '[]' };
        const id = newId('mcp', 12);
        const at = Date.now();
        const row: ServerRow = {
          server_id: id,
          city_id: city,
          name: input.name,
          url,
          auth_type: input.auth.type,
          auth: await sealAuth(gateway, id, input.auth),
          ...filter,
          price: input.price,
          prices: JSON.stringify(input.prices),
          timeout_ms: input.timeout_ms,
          enabled: input.enabled ? 1 : 0,
          description: input.description,
          created_at: at,
          updated_at: at,
        };
        try {
          await gateway.db.kysely.insertInto('mcp_servers').values(row).execute();
        } catch (e) {
          if (isUniqueViolation(e)) throw conflict('server_exists', `The city already has an MCP server named '${input.name}'.`, 'name');
          throw e;
        }
        forgetCity(city);
        return view(gateway, row);
      },
    }),
    'servers/list': action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: "A city's MCP servers (a bureau sees only its own city's; no credentials)",
      input: z.object({ city_id: cityIdSchema.optional() }),
      output: z.object({ items: z.array(serverView) }),
      handler: async ({ gateway, identity, input }) => ({
        items: await Promise.all((await listServers(gateway, scopedCity(identity, input.city_id))).map((r) => view(gateway, r))),
      }),
    }),
    'servers/update': action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Change an MCP server: any field; auth is replaced whole',
      input: updateInput,
      output: serverView,
      errors: [409],
      handler: async ({ gateway, identity, input }) => {
        const row = await serverFor(gateway, identity, input.server_id);
        const set: Partial<ServerRow> = { updated_at: Math.max(Date.now(), Number(row.updated_at) + 1) };
        if (input.name !== undefined) set.name = input.name;
        if (input.url !== undefined) set.url = checkServerUrl(gateway, input.url);
        if (input.description !== undefined) set.description = input.description;
        if (input.auth !== undefined) {
          if (input.auth.type === 'oauth') checkServerUrl(gateway, input.auth.token_url, 'auth.token_url');
          set.auth_type = input.auth.type;
          set.auth = await sealAuth(gateway, row.server_id, input.auth);
        }
        const filter = filterOf(input.allowed_tools, input.denied_tools);
        if (filter) Object.assign(set, filter);
        if (input.price !== undefined) set.price = input.price;
        if (input.prices !== undefined) set.prices = JSON.stringify(input.prices);
        if (input.timeout_ms !== undefined) set.timeout_ms = input.timeout_ms;
        if (input.enabled !== undefined) set.enabled = input.enabled ? 1 : 0;
        try {
          await gateway.db.kysely.updateTable('mcp_servers').set(set).where('server_id', '=', row.server_id).execute();
        } catch (e) {
          if (isUniqueViolation(e)) throw conflict('server_exists', `The city already has an MCP server named '${input.name}'.`, 'name');
          throw e;
        }
        forget(gateway, row);
        return view(gateway, { ...row, ...set });
      },
    }),
    'servers/remove': action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Remove an MCP server (its tools disappear from /v1/mcp; past usage stays)',
      input: z.object({ server_id: z.string().min(1).max(100) }),
      output: z.object({ server_id: z.string(), removed: z.boolean() }),
      handler: async ({ gateway, identity, input }) => {
        const row = await serverFor(gateway, identity, input.server_id);
        await gateway.db.kysely.deleteFrom('mcp_servers').where('server_id', '=', row.server_id).execute();
        forget(gateway, row);
        return { server_id: row.server_id, removed: true };
      },
    }),
    'servers/test': action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Connect to an MCP server, list its tools and report (which are allowed, at what price)',
      input: z.object({ server_id: z.string().min(1).max(100) }),
      output: testOutput,
      handler: async ({ gateway, identity, input }) => {
        const row = await serverFor(gateway, identity, input.server_id);
        const started = performance.now();
        const report = { ok: false, server_id: row.server_id, latency_ms: 0, server_info: null as { name: string; version: string } | null, protocol_version: null as string | null, tools: [] as z.infer<typeof testedTool>[], error: null as string | null };
        const { connect, describeError, forgetTools, upstreamTools } = await sdk();
        try {
          const client = await connect(gateway, row);
          try {
            const info = client.getServerVersion();
            report.server_info = info ? { name: info.name, version: info.version } : null;
            report.protocol_version = (client.transport as { protocolVersion?: string } | undefined)?.protocolVersion ?? null;
          } finally {
            await client.close().catch(() => {});
          }
          forgetTools(row.server_id);
          const tools = await upstreamTools(gateway, row, true);
          report.tools = tools.map((t) => ({ name: t.name, exposed_as: `${row.name}${SEPARATOR}${t.name}`, description: t.description ?? null, allowed: toolAllowed(row, t.name), price: priceOf(row, t.name) }));
          report.ok = true;
        } catch (e) {
          report.error = describeError(e);
          if (e instanceof GatewayError) throw e;
        }
        report.latency_ms = Math.round(performance.now() - started);
        return report;
      },
    }),
  },
});
