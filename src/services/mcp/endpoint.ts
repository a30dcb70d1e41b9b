// citygate as an MCP server: POST /v1/mcp, Streamable HTTP, the official SDK's low-level Server
// on its Web-standard transport (the same code on Node and Workers), stateless.
//
// Stateless (no Mcp-Session-Id) because every request carries all citygate needs: the user's
// credential (checked by the kernel on each request, so a revoked key stops at once), and the
// city's servers and prices (read from the database through a short per-process cache). Any
// process or replica answers any request; nothing is kept between requests that another
// replica would have to find, and Workers' isolates need nothing shared. citygate sends no
// server-initiated messages (no sampling, no list_changed), so a session would buy nothing.
// The version is negotiated by the SDK (initialize, then MCP-Protocol-Version on each request).
// Answers are JSON (enableJsonResponse): one response per POST, which the request log keeps.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import type { ActionContext } from '../../kernel/service.ts';
import { callTool } from './call.ts';
import { cityTools } from './tools.ts';

// One validator for every request's Server (each would build its own Ajv: ~10 % of a call's CPU).
// citygate never elicits, so it is never even used; it is shared so that it is never built again.
let validator: AjvJsonSchemaValidator | undefined;

const INSTRUCTIONS = "Tools of this city's MCP servers, named <server>__<tool>. Each call may cost credits from your balance.";

export async function serveMcp(ctx: ActionContext<unknown>): Promise<Response> {
  const { gateway: gw, identity } = ctx;
  if (identity.kind !== 'user') throw new Error('unreachable: /v1/mcp admits users only');
  const bytes = await ctx.rawBody();
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return Response.json({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: the body is not JSON.' }, id: null }, { status: 400 });
  }
  const server = new Server({ name: 'citygate', version: gw.config.version }, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS, jsonSchemaValidator: (validator ??= new AjvJsonSchemaValidator()) });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await cityTools(gw, identity.cityId) }));
  server.setRequestHandler(CallToolRequestSchema, (req, extra) =>
    callTool({ gw, identity, requestId: ctx.requestId, timing: ctx.timing, signal: AbortSignal.any([extra.signal, ctx.signal]) }, req.params.name, req.params.arguments),
  );
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  // Not closed afterwards: a JSON answer leaves nothing open, and close() would build an error
  // and abort controllers per request for nothing; both objects go with the request.
  return transport.handleRequest(ctx.request, { parsedBody: body });
}
