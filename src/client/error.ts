// The one error a citygate client throws: the gateway's error body, with the HTTP status.

export class CitygateError extends Error {
  /** The HTTP status (0 when the gateway could not be reached). */
  readonly status: number;
  /** The error family: `invalid_request_error`, `authentication_error`, `billing_error`, … */
  readonly type: string;
  /** The machine-readable reason: `invalid_input`, `missing_credential`, `insufficient_credits`, … */
  readonly code: string;
  /** The input field at fault, when there is one (`model`, `city_id`, `messages.0.role`, …). */
  readonly param?: string;
  /** The gateway's `x-request-id`, to quote in a support request. */
  readonly requestId?: string;

  constructor(status: number, error: { type: string; code: string; message: string; param?: string }, requestId?: string) {
    super(error.message);
    this.name = 'CitygateError';
    this.status = status;
    this.type = error.type;
    this.code = error.code;
    if (error.param !== undefined) this.param = error.param;
    if (requestId) this.requestId = requestId;
  }

  /** Reads a failed response: the gateway's error body, or a generic one for anything else. */
  static async from(res: Response): Promise<CitygateError> {
    const requestId = res.headers.get('x-request-id') ?? undefined;
    const text = await res.text().catch(() => '');
    try {
      const body = JSON.parse(text) as { error?: { type?: unknown; code?: unknown; message?: unknown; param?: unknown } };
      const e = body?.error;
      if (e && typeof e.code === 'string' && typeof e.message === 'string') {
        return new CitygateError(
          res.status,
          {
            type: typeof e.type === 'string' ? e.type : 'api_error',
            code: e.code,
            message: e.message,
            ...(typeof e.param === 'string' ? { param: e.param } : {}),
          },
          requestId,
        );
      }
    } catch {
      /* not JSON: below */
    }
    return new CitygateError(
      res.status,
      { type: 'api_error', code: `http_${res.status}`, message: `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}` },
      requestId,
    );
  }
}

export function isCitygateError(e: unknown): e is CitygateError {
  return e instanceof CitygateError;
}
