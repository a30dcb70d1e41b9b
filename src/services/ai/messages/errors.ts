// Errors of the Messages API routes in Anthropic's shape, with citygate's status codes:
// {"type":"error","error":{"type":"authentication_error","message":"…"}}. The Anthropic SDK
// and Claude Code read `error.type`; citygate's own code rides along in the message.
import type { GatewayError } from '../../../kernel/errors.ts';

const TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
};

export function anthropicErrorBody(e: GatewayError) {
  return { type: 'error' as const, error: { type: TYPES[e.status] ?? (e.status >= 500 ? 'api_error' : 'invalid_request_error'), message: `${e.message} (${e.code})` } };
}

export function anthropicError(e: GatewayError): Response {
  const headers = new Headers(e.headers);
  headers.set('content-type', 'application/json; charset=utf-8');
  return new Response(JSON.stringify(anthropicErrorBody(e)), { status: e.status, headers });
}

export const anthropicErrorEvent = (e: GatewayError) => `event: error\ndata: ${JSON.stringify(anthropicErrorBody(e))}\n\n`;
