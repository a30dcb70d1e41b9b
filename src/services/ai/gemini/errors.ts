// Errors of the Gemini API routes in Google's shape, with citygate's status codes:
// {"error": {"code": 401, "message": "… (invalid_token)", "status": "UNAUTHENTICATED",
// "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "invalid_token",
// "domain": "citygate", "metadata": {"param": "…"}}]}}. Google's clients read `error.code`,
// `error.message` and `error.status`; citygate's own code rides in the message and the ErrorInfo.
import type { GatewayError } from '../../../kernel/errors.ts';

const STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'RESOURCE_EXHAUSTED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  405: 'UNIMPLEMENTED',
  409: 'ABORTED',
  413: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

export function googleErrorBody(e: GatewayError) {
  const info = { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: e.code, domain: 'citygate', ...(e.param ? { metadata: { param: e.param } } : {}) };
  return { error: { code: e.status, message: `${e.message} (${e.code})`, status: STATUS[e.status] ?? (e.status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION'), details: [info] } };
}

export function googleError(e: GatewayError): Response {
  const headers = new Headers(e.headers);
  headers.set('content-type', 'application/json; charset=utf-8');
  return new Response(JSON.stringify(googleErrorBody(e)), { status: e.status, headers });
}

/** A stream that breaks off ends with one more response: Google's {"error": …} (SSE framing; stream.ts re-frames it for JSON arrays). */
export const googleErrorEvent = (e: GatewayError) => `data: ${JSON.stringify(googleErrorBody(e))}\r\n\r\n`;
