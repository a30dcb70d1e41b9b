// One error shape everywhere (OpenAI-style): {"error": {"type", "code", "message", "param"?}}.
// Handlers throw GatewayError; anything else that escapes is a bug and becomes a logged 500.

const TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'conflict_error',
  410: 'invalid_request_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'upstream_error',
  503: 'api_error',
  504: 'upstream_error',
};

export interface ErrorBody {
  error: { type: string; code: string; message: string; param?: string };
}

export class GatewayError extends Error {
  readonly status: number;
  readonly code: string;
  readonly type: string;
  readonly param?: string;
  readonly headers?: Record<string, string>;

  constructor(
    status: number,
    code: string,
    message: string,
    opts: { param?: string; type?: string; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.status = status;
    this.code = code;
    this.type = opts.type ?? TYPES[status] ?? 'api_error';
    this.param = opts.param;
    this.headers = opts.headers;
  }

  toJSON(): ErrorBody {
    const error: ErrorBody['error'] = { type: this.type, code: this.code, message: this.message };
    if (this.param !== undefined) error.param = this.param;
    return { error };
  }

  toResponse(extraHeaders?: HeadersInit): Response {
    const headers = new Headers(extraHeaders);
    headers.set('content-type', 'application/json; charset=utf-8');
    for (const [k, v] of Object.entries(this.headers ?? {})) headers.set(k, v);
    return new Response(JSON.stringify(this.toJSON()), { status: this.status, headers });
  }
}

/** A client that went away before its answer (499, as nginx logs it). */
export const CLIENT_CLOSED = 'client_closed_request';

export const badRequest = (code: string, message: string, param?: string) =>
  new GatewayError(400, code, message, { param });
export const unauthorized = (code: string, message: string) => new GatewayError(401, code, message);
export const forbidden = (code: string, message: string) => new GatewayError(403, code, message);
export const notFound = (code: string, message: string, param?: string) =>
  new GatewayError(404, code, message, { param });
export const conflict = (code: string, message: string, param?: string) =>
  new GatewayError(409, code, message, { param });

export function isGatewayError(e: unknown): e is GatewayError {
  return e instanceof GatewayError;
}
