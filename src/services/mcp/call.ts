// One tools/call through citygate, metered like a model call (ai/meter.ts's AiCall, with the
// tool's price as a fixed per-request price): the user's concurrency cap and credit hold
// (402 when short) before the upstream is called; then the call through the server's breaker,
// in a span of its own; then exactly one settle (charged the price when the upstream answered,
// released when it did not) and one usage record of mode 'mcp' (model `<server>__<tool>`,
// upstream the server's name, duration_ms the latency). An upstream's tool result with
// isError is an answer: it is charged.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { GatewayContext } from '../../kernel/context.ts';
import { GatewayError } from '../../kernel/errors.ts';
import type { Identity } from '../../kernel/identity.ts';
import { metrics } from '../../kernel/metrics.ts';
import type { RequestTiming } from '../../kernel/service.ts';
import { AiCall } from '../ai/meter.ts';
import type { Mode } from '../ai/catalog/registry.ts';
import { breakerKey, breakerOf } from './breaker.ts';
import { classify, fromGatewayError, gatewayMcpError } from './errors.ts';
import { scrub } from './secrets.ts';
import { cityServers } from './store.ts';
import { priceOf, splitName, toolAllowed } from './tool-rules.ts';
import { clientFor } from './upstream.ts';

export const MCP_MODE = 'mcp' as Mode;

export interface ToolCallContext {
  gw: GatewayContext;
  identity: Extract<Identity, { kind: 'user' }>;
  requestId: string;
  timing: RequestTiming;
  signal: AbortSignal;
}

const unknownTool = (name: string) => new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`, { type: 'invalid_request_error', code: 'unknown_tool', status: 404 });

export async function callTool(ctx: ToolCallContext, name: string, args: Record<string, unknown> | undefined): Promise<CallToolResult> {
  const { gw, identity } = ctx;
  const parts = splitName(name);
  if (!parts) throw unknownTool(name);
  const row = (await cityServers(gw, identity.cityId)).find((r) => r.name === parts.server && r.enabled === 1);
  if (!row || !toolAllowed(row, parts.tool)) throw unknownTool(name);
  const price = priceOf(row, parts.tool);
  const prices = price > 0 ? { per_request: price } : null;
  const call = new AiCall(
    gw,
    { requestId: ctx.requestId, identity, modelId: name, mode: MCP_MODE, startedAt: Date.now(), hold: null, timing: ctx.timing },
    null,
    undefined,
    { prices, basePrices: prices },
  );
  call.routed(row.name, 1);
  const count = (outcome: string) => metrics().mcpCalls.inc({ city: identity.cityId, server: row.name, tool: parts.tool, outcome });

  const breaker = breakerOf(gw);
  const key = breakerKey(row);
  if (!breaker.callable(key)) {
    const wait = Math.max(0, Math.ceil((breaker.readyAt(key) - Date.now()) / 1000));
    await call.finish('error', {}, 'upstream_unavailable');
    count('circuit_open');
    throw gatewayMcpError(503, 'upstream_unavailable', `The MCP server '${row.name}' is failing; citygate stopped calling it for now${Number.isFinite(wait) ? ` (retry in about ${wait} s)` : ''}.`);
  }

  try {
    await call.reserve({});
  } catch (e) {
    count(e instanceof GatewayError ? e.code : 'refused');
    if (e instanceof GatewayError) throw fromGatewayError(e);
    throw e;
  }

  breaker.begin(key);
  const span = ctx.timing.trace?.attempt({ operation: 'execute_tool', provider: 'mcp', requestModel: name, responseModel: name, upstream: `mcp:${row.name}`, baseUrl: row.url, carrier: [] });
  const started = performance.now();
  // Aborted only while the call is out (the SDK keeps listening to a signal after its request
  // ended, and would send the upstream a stray notifications/cancelled when the request's own
  // signal fires at its end).
  const ac = new AbortController();
  const abort = () => ac.abort(ctx.signal.reason);
  ctx.signal.addEventListener('abort', abort, { once: true });
  let c = clientFor(gw, row, ac.signal);
  const once = async () => (await (await c.client).callTool({ name: parts.tool, arguments: args ?? {} }, undefined, { timeout: row.timeout_ms, signal: ac.signal })) as CallToolResult;
  let result: CallToolResult;
  try {
    try {
      result = await once();
    } catch (e) {
      // A kept client whose session the upstream no longer knows (it restarted): connect again, once.
      if (!(e instanceof StreamableHTTPError && e.code === 404) || !gw.config.gracefulStop) throw e;
      c.drop();
      c = clientFor(gw, row, ac.signal);
      result = await once();
    }
  } catch (e) {
    const ms = performance.now() - started;
    ctx.timing.upstreamMs += ms;
    c.drop();
    if (ac.signal.aborted) {
      breaker.release(key);
      span?.fail('aborted');
      await call.finish('aborted', {}, 'client_closed');
      count('aborted');
      throw e;
    }
    const f = classify(e, row.name, row.timeout_ms);
    if (f.upstreamFault) breaker.failure(key);
    else breaker.release(key);
    span?.fail(f.code);
    observe(row.name, name, ms, f.code);
    await call.finish('error', {}, f.code);
    count(f.code);
    if (f.code !== 'upstream_rejected') gw.log('warn', 'mcp: tool call failed', { request_id: ctx.requestId, server: row.name, tool: parts.tool, code: f.code, message: f.error.message });
    throw f.error;
  } finally {
    ctx.signal.removeEventListener('abort', abort);
    c.done();
  }
  const ms = performance.now() - started;
  ctx.timing.upstreamMs += ms;
  breaker.success(key);
  span?.answered(true);
  observe(row.name, name, ms, '');
  await call.finish('ok', {});
  count(result.isError ? 'tool_error' : 'ok');
  return result.isError ? scrubbed(result) : result;
}

/** A tool's error result with every held secret taken out of its text (an upstream's error, like any other). */
function scrubbed(r: CallToolResult): CallToolResult {
  return { ...r, content: r.content.map((c) => (c.type === 'text' ? { ...c, text: scrub(c.text) } : c)) };
}

function observe(server: string, tool: string, ms: number, errorType: string): void {
  const m = metrics();
  m.attempts.inc({ upstream: `mcp:${server}`, model: tool, outcome: errorType || 'ok' });
  m.upstreamDuration.observe({ gen_ai_operation_name: 'execute_tool', gen_ai_request_model: tool, upstream: `mcp:${server}`, error_type: errorType }, ms / 1000);
}
