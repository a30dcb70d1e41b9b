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
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text };
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
