// How a refused or failed tool call reaches the MCP client: a JSON-RPC error whose code says
// what happened and whose data carries citygate's error (type, code, HTTP-like status), so a
// client shows the message ("Insufficient credits…") and a program can act on data.code.
// Upstream text is scrubbed of every held secret before it is put in a message.
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { GatewayError } from '../../kernel/errors.ts';
import { UnreadableUrl } from '../../kernel/outbound/policy.ts';
import { TokenError } from './oauth.ts';
import { scrub } from './secrets.ts';

/**
 * JSON-RPC codes (implementation-defined server errors, −32000…−32099) by citygate status.
 * −32040 for insufficient credits: −32042 is the SDK's UrlElicitationRequired, −32002 MCP's
 * resource-not-found.
 */
export const MCP_CODES: Record<number, number> = {
  401: -32041,
  402: -32040,
  403: -32043,
  429: -32029,
  502: -32052,
  503: -32053,
  504: -32054,
};

export function gatewayMcpError(status: number, code: string, message: string): McpError {
  return new McpError(MCP_CODES[status] ?? ErrorCode.InternalError, message, { type: typeOf(status), code, status });
}

function typeOf(status: number): string {
  if (status === 402) return 'insufficient_credits';
  if (status === 429) return 'rate_limit_error';
  if (status === 401 || status === 403) return 'permission_error';
  if (status >= 500) return 'upstream_error';
  return 'invalid_request_error';
}

/** A GatewayError (a 402 from billing, a 429 from the concurrency cap) as the client's MCP error. */
export function fromGatewayError(e: GatewayError): McpError {
  return gatewayMcpError(e.status, e.code, e.message);
}

export interface UpstreamFailure {
  /** The upstream's own fault (connection, timeout, 5xx, 429): counts toward its breaker. */
  upstreamFault: boolean;
  /** The error code of the usage record and metrics. */
  code: string;
  error: McpError;
}

/** What an upstream call's error means, with a message fit for the client (scrubbed). */
export function classify(e: unknown, server: string, timeoutMs: number): UpstreamFailure {
  if (e instanceof McpError) {
    if (e.code === ErrorCode.RequestTimeout) return fault(504, 'upstream_timeout', `The MCP server '${server}' did not answer within ${timeoutMs} ms.`);
    if (e.code === ErrorCode.ConnectionClosed) return fault(502, 'upstream_unavailable', `The connection to the MCP server '${server}' was closed.`);
    // The upstream's own JSON-RPC error (bad arguments, unknown tool): passed on, scrubbed, no fault.
    const msg = scrub(e.message.replace(/^MCP error -?\d+: /, ''));
    return { upstreamFault: false, code: 'upstream_rejected', error: new McpError(e.code, `${server}: ${msg}`, { type: 'upstream_error', code: 'upstream_rejected', status: 400 }) };
  }
  if (e instanceof StreamableHTTPError) {
    const st = e.code ?? 0;
    if (st === 401 || st === 403) return { upstreamFault: false, code: 'upstream_auth_failed', error: gatewayMcpError(502, 'upstream_auth_failed', `The MCP server '${server}' refused citygate's credentials (${st}); the city's operator must fix the server's auth.`) };
    return fault(502, 'upstream_error', `The MCP server '${server}' answered HTTP ${st || 'error'}.`);
  }
  // One tool's large answers say nothing of the server's health: not counted toward its breaker.
  if (e instanceof UnreadableUrl && e.reason === 'too_large') return { upstreamFault: false, code: 'upstream_too_large', error: gatewayMcpError(502, 'upstream_too_large', `The MCP server '${server}' answered more than citygate accepts (AI_FETCH_MAX_BYTES).`) };
  if (e instanceof UnreadableUrl) return { upstreamFault: false, code: 'upstream_refused', error: gatewayMcpError(502, 'upstream_refused', `The MCP server '${server}' is not reachable under the outbound policy: ${e.message}.`) };
  if (e instanceof TokenError) return fault(502, 'upstream_auth_failed', `citygate could not obtain an access token for the MCP server '${server}': ${scrub(e.message)}.`);
  if (isAbort(e)) return fault(504, 'upstream_timeout', `The MCP server '${server}' did not answer within ${timeoutMs} ms.`);
  return fault(502, 'upstream_unavailable', `The MCP server '${server}' could not be reached.`);
}

function fault(status: number, code: string, message: string): UpstreamFailure {
  return { upstreamFault: true, code, error: gatewayMcpError(status, code, message) };
}

const isAbort = (e: unknown) => e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError');

/** An error for a log line: its class and scrubbed message, never a stack full of request data. */
export function describeError(e: unknown): string {
  if (!(e instanceof Error)) return scrub(String(e)).slice(0, 500);
  // fetch's "fetch failed" says nothing: its cause does (ECONNREFUSED, a refused address…)
  const cause = (e as { cause?: { code?: unknown; message?: unknown } }).cause;
  const why = cause && (typeof cause.code === 'string' ? cause.code : typeof cause.message === 'string' ? cause.message : '');
  return scrub(`${e.name}: ${e.message}${why ? ` (${why})` : ''}`).slice(0, 500);
}
