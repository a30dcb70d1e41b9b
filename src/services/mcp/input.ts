// The servers' input schemas and how a row is shown (credentials never: header names only,
// OAuth's client id and endpoints, never a value or a secret).
import { z } from 'zod';
import { badRequest } from '../../kernel/errors.ts';
import type { ServerAuth, ServerRow } from './store.ts';

export const serverName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,31}$/, 'lower-case letters, digits and -, at most 32, starting with a letter or digit')
  .describe('unique in the city; its tools are named <name>__<tool>');

const RESERVED_HEADERS = new Set(['host', 'content-length', 'content-type', 'accept', 'connection', 'transfer-encoding', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id']);

const headerName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'an HTTP header name');

export const authInput = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('none') }),
    z.object({
      type: z.literal('headers'),
      headers: z
        .record(headerName, z.string().min(1).max(4000).regex(/^[^\r\n\0]*$/, 'no line breaks'))
        .refine((h) => Object.keys(h).length >= 1 && Object.keys(h).length <= 20, '1 to 20 headers')
        .refine((h) => !Object.keys(h).some((k) => RESERVED_HEADERS.has(k.toLowerCase())), 'a header citygate sets itself (host, content-*, accept, mcp-*)'),
    }),
    z.object({
      type: z.literal('oauth'),
      token_url: z.string().url().max(2000).describe('the token endpoint (client credentials grant)'),
      client_id: z.string().min(1).max(500),
      client_secret: z.string().min(1).max(2000),
      scope: z.string().max(1000).optional(),
      audience: z.string().max(2000).optional().describe("RFC 8707 resource: the server's URL the token is for"),
    }),
  ])
  .describe("the upstream's credentials: static headers, or OAuth client credentials (citygate obtains and refreshes the token); sealed at rest, never shown again");

const toolList = z.array(z.string().min(1).max(128)).max(500);
const credits = z.number().int().min(0).max(1_000_000_000);

export const serverFields = {
  url: z.string().trim().min(1).max(2000).describe('the Streamable HTTP endpoint (http or https)'),
  description: z.string().max(500),
  auth: authInput,
  allowed_tools: toolList.nullable().describe('only these tools (null: no allow-list)'),
  denied_tools: toolList.nullable().describe('every tool but these (null: no deny-list)'),
  price: credits.describe('credits per tool call'),
  prices: z.record(z.string().min(1).max(128), credits).refine((p) => Object.keys(p).length <= 500, 'at most 500 tools').describe('credits per call of single tools, overriding price'),
  timeout_ms: z.number().int().min(100).max(300_000).describe('deadline of one upstream call'),
  enabled: z.boolean(),
};

/** The filter columns of an allow- or deny-list; both at once is a 400. */
export function filterOf(allowed: string[] | null | undefined, denied: string[] | null | undefined): { tool_filter: string; tools: string } | undefined {
  if (allowed && denied) throw badRequest('invalid_tools', 'Give allowed_tools or denied_tools, not both.', 'denied_tools');
  if (allowed) return { tool_filter: 'allow', tools: JSON.stringify([...new Set(allowed)]) };
  if (denied) return { tool_filter: 'deny', tools: JSON.stringify([...new Set(denied)]) };
  if (allowed === null || denied === null) return { tool_filter: 'all', tools: '[]' };
  return undefined;
}

export const serverView = z.object({
  server_id: z.string(),
  city_id: z.string(),
  name: z.string(),
  url: z.string(),
  description: z.string(),
  auth: z.object({ type: z.enum(['none', 'headers', 'oauth']), header_names: z.array(z.string()).optional(), token_url: z.string().optional(), client_id: z.string().optional(), scope: z.string().optional() }),
  allowed_tools: z.array(z.string()).nullable(),
  denied_tools: z.array(z.string()).nullable(),
  price: z.number(),
  prices: z.record(z.string(), z.number()),
  timeout_ms: z.number(),
  enabled: z.boolean(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

export function toView(r: ServerRow, auth: ServerAuth) {
  const tools = JSON.parse(r.tools) as string[];
  return {
    server_id: r.server_id,
    city_id: r.city_id,
    name: r.name,
    url: r.url,
    description: r.description,
    auth:
      auth.type === 'headers'
        ? { type: 'headers' as const, header_names: Object.keys(auth.headers) }
        : auth.type === 'oauth'
          ? { type: 'oauth' as const, token_url: auth.token_url, client_id: auth.client_id, ...(auth.scope ? { scope: auth.scope } : {}) }
          : { type: 'none' as const },
    allowed_tools: r.tool_filter === 'allow' ? tools : null,
    denied_tools: r.tool_filter === 'deny' ? tools : null,
    price: Number(r.price),
    prices: JSON.parse(r.prices) as Record<string, number>,
    timeout_ms: Number(r.timeout_ms),
    enabled: Number(r.enabled) === 1,
    created_at: new Date(Number(r.created_at)).toISOString(),
    updated_at: new Date(Number(r.updated_at)).toISOString(),
  };
}
