// A thin fetch wrapper for black-box tests: what a user's HTTP client sees.
export interface Res<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export async function call<T = any>(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<Res<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  let res: Response;
  try {
    res = await fetch(base + path, { method, headers, body });
  } catch (e) {
    if (!(method === 'GET' && staleConnection(e))) throw e;
    // A GET once more, on a new connection, as HTTP clients do (RFC 9112 §9.3.1): see staleConnection.
    res = await fetch(base + path, { method, headers, body });
  }
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

/**
 * A pooled keep-alive connection that the gateway had closed as idle (HTTP_KEEP_ALIVE_TIMEOUT_MS,
 * 5 s) before this request went out on it: "other side closed" on a socket that carried earlier
 * answers. undici drops idle sockets on a timer, which cannot run while the test keeps its event
 * loop busy: test/client/openapi.test.ts validates a 270 KB document for 40 s on a loaded machine,
 * and its next GET went out on the socket that had fetched the document (276,932 bytes read).
 */
function staleConnection(e: unknown): boolean {
  const cause = (e as { cause?: { code?: string; message?: string; socket?: { bytesRead?: number } } })?.cause;
  return cause?.code === 'UND_ERR_SOCKET' && cause.message === 'other side closed' && (cause.socket?.bytesRead ?? 0) > 0;
}

/** A client bound to one base URL and one credential. */
export function client(base: string, token?: string) {
  return {
    get: <T = any>(path: string, t = token) => call<T>(base, 'GET', path, { token: t }),
    post: <T = any>(path: string, body?: unknown, t = token) => call<T>(base, 'POST', path, { token: t, body: body ?? {} }),
  };
}

/** Asserts the one error shape and returns its code. */
export function errorOf(r: Res): { type: string; code: string; message: string; param?: string } {
  const e = (r.body as { error?: unknown })?.error as { type: string; code: string; message: string; param?: string };
  if (!e || typeof e.type !== 'string' || typeof e.code !== 'string' || typeof e.message !== 'string') {
    throw new Error(`not the error shape (status ${r.status}): ${r.text}`);
  }
  return e;
}

/** A slow client: reads the first chunk of a streamed body, stops reading for `pauseMs`, then reads the rest; the whole text. */
export async function readWithPause(res: Response, pauseMs: number): Promise<string> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = dec.decode((await reader.read()).value, { stream: true });
  await new Promise((r) => setTimeout(r, pauseMs));
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + dec.decode();
    text += dec.decode(value, { stream: true });
  }
}
