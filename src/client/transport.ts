// One request to the gateway: the bearer credential, GET inputs as the query string, POST
// inputs as JSON, failures as CitygateError. Web APIs only (fetch, URL, streams), so it runs in
// browsers, Node and Workers alike.
import { CitygateError } from './error.ts';
import { methodOf, type Method } from './routes.ts';

export type FetchLike = (input: Request | string | URL, init?: RequestInit) => Promise<Response>;

export interface TransportOptions {
  /** The gateway's base URL, e.g. `https://gateway.example.com`. */
  baseURL: string;
  /** The bearer credential: a user token, a bureau token or the admin key; none for a guest. */
  token?: string | (() => string | undefined | Promise<string | undefined>);
  /** A fetch implementation (default: the global one). */
  fetch?: FetchLike;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

export interface RequestOptions {
  method?: Method;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

export class Transport {
  readonly baseURL: string;
  #token: TransportOptions['token'];
  readonly #fetch: FetchLike;
  readonly #headers: Record<string, string>;

  constructor(opts: TransportOptions) {
    if (!opts.baseURL) throw new TypeError('citygate client: baseURL is required');
    this.baseURL = opts.baseURL.replace(/\/+$/, '');
    this.#token = opts.token;
    // Bound, so a browser's window.fetch is not called with the wrong `this`.
    this.#fetch = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#headers = opts.headers ?? {};
  }

  setToken(token: TransportOptions['token']): void {
    this.#token = token;
  }

  async token(): Promise<string | undefined> {
    return typeof this.#token === 'function' ? await this.#token() : this.#token;
  }

  /** Sends an action's input and answers the raw Response when it succeeded. */
  async send(service: string, action: string, input?: unknown, opts: RequestOptions = {}): Promise<Response> {
    const method = opts.method ?? methodOf(service, action);
    const url = new URL(`${this.baseURL}/v1/${service}/${action}`);
    const headers: Record<string, string> = { accept: 'application/json', ...this.#headers, ...opts.headers };
    const token = await this.token();
    if (token) headers.authorization = `Bearer ${token}`;
    let body: BodyInit | undefined;
    if (method === 'GET') {
      for (const [k, v] of Object.entries((input ?? {}) as Record<string, unknown>)) {
        if (v === undefined || v === null) continue;
        for (const item of Array.isArray(v) ? v : [v]) url.searchParams.append(k, String(item));
      }
    } else if (input instanceof FormData) {
      body = input;
    } else {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(input ?? {});
    }
    let res: Response;
    try {
      res = await this.#fetch(url.toString(), { method, headers, body, signal: opts.signal });
    } catch (e) {
      if ((e as Error)?.name === 'AbortError') throw e;
      throw new CitygateError(0, { type: 'connection_error', code: 'network_error', message: `Could not reach ${this.baseURL}: ${(e as Error)?.message ?? e}` });
    }
    if (!res.ok) throw await CitygateError.from(res);
    return res;
  }

  /** Sends an action's input and answers its JSON. */
  async json<T>(service: string, action: string, input?: unknown, opts?: RequestOptions): Promise<T> {
    const res = await this.send(service, action, input, opts);
    return (await res.json()) as T;
  }

  /** GET a path outside /v1 (`/health`). */
  async get<T>(path: string): Promise<T> {
    const res = await this.#fetch(`${this.baseURL}${path}`, { headers: { accept: 'application/json', ...this.#headers } }).catch((e: Error) => {
      throw new CitygateError(0, { type: 'connection_error', code: 'network_error', message: `Could not reach ${this.baseURL}: ${e?.message ?? e}` });
    });
    if (!res.ok) throw await CitygateError.from(res);
    return (await res.json()) as T;
  }
}

/**
 * Parses a server-sent event stream of JSON events (the AI SDK's UI message stream, or Chat
 * Completions chunks) into a stream of objects; `[DONE]` ends it.
 */
export function parseJsonEvents<T>(body: ReadableStream<Uint8Array>): ReadableStream<T> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  return new ReadableStream<T>({
    async pull(controller) {
      for (;;) {
        const end = buffer.search(/\r?\n\r?\n/);
        if (end >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
          const data = event
            .split(/\r?\n/)
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).replace(/^ /, ''))
            .join('\n');
          if (!data) continue;
          if (data === '[DONE]') {
            controller.close();
            await reader.cancel().catch(() => {});
            return;
          }
          controller.enqueue(JSON.parse(data) as T);
          return;
        }
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        buffer += decoder.decode(value, { stream: true });
      }
    },
    async cancel(reason) {
      await reader.cancel(reason);
    },
  });
}
