import type { OutboundRules } from './outbound/policy.ts';

// Outbound HTTP to upstream providers. The runtime picks the client: a keep-alive undici pool
// on Node (src/runtimes/node/upstream-http.ts), the platform's fetch on Workers. Services only
// see this small interface.

export interface UpstreamRequest {
  method: 'GET' | 'POST' | 'DELETE';
  url: string;
  headers: Record<string, string>;
  body?: Uint8Array | string;
  signal?: AbortSignal;
  /** Instead of `signal`: a source a runtime may listen to more cheaply (see AbortSource). */
  abort?: AbortSource;
}

/**
 * What aborts an upstream call without an AbortSignal up front (ai's per-attempt Deadline): its
 * `signal` is made when first read, and a client that can listen to an EventEmitter-shaped
 * source (the Node upstream client) listens to this object itself; a listener on an
 * AbortSignal costs several times more.
 */
export interface AbortSource {
  readonly signal: AbortSignal;
  readonly isAborted: boolean;
  /** Why it was aborted (once it was). */
  readonly reason: unknown;
  on(event: 'abort', fn: () => void): unknown;
  once(event: 'abort', fn: () => void): unknown;
  removeListener(event: 'abort', fn: () => void): unknown;
  /** A chunk of the answer arrived (an idle deadline counts from the last one). */
  touch?(): void;
  /**
   * The reader has stopped reading for now (its client is slow: backpressure), so the upstream
   * is not the one being waited for: an idle deadline waits until the next touch().
   */
  hold?(): void;
}

/** A stream being relayed to a client, which the gateway ends when it stops (see endOpenStreams). */
export interface OpenStream {
  /** Ends the stream now, with its API's error event; it is charged by the estimate rules. */
  end(): void;
}

/** The streams of this process (isolate) that are relaying an upstream's answer now. */
export const openStreams = new Set<OpenStream>();

/** Ends every open stream (a drain whose deadline passed); returns how many. */
export function endOpenStreams(): number {
  const all = [...openStreams];
  for (const s of all) s.end();
  return all.length;
}

export interface UpstreamResponse {
  status: number;
  /** A response header (lower-case name), or null. */
  header(name: string): string | null;
  /** The body as it arrives; read it once (or call cancel). */
  body: AsyncIterable<Uint8Array>;
  bytes(): Promise<Uint8Array>;
  text(): Promise<string>;
  /** Drops the rest of the body and releases the connection. */
  cancel(): void;
}

export interface UpstreamHttp {
  request(r: UpstreamRequest): Promise<UpstreamResponse>;
  /** A fetch for SDK clients (the AI SDK's providers). */
  fetch: typeof fetch;
  /**
   * A fetch for URLs a caller gave (kernel/outbound/policy.ts is its only user): connects only to
   * addresses `rules` allow, checked after resolution at connect time where the runtime can.
   */
  untrusted(url: string, init: RequestInit, rules: OutboundRules): Promise<Response>;
}

/** The runtime-neutral client: the platform's fetch (Workers, tests, any runtime). */
export function fetchHttp(raw: typeof fetch = (...a) => fetch(...a)): UpstreamHttp {
  // A connection failure is a TypeError('fetch failed') in Node and browsers, but workerd throws
  // plain Errors ("Network connection lost."): make them all the TypeError callers recognise.
  const f: typeof fetch = async (input, init) => {
    try {
      return await raw(input, init);
    } catch (e) {
      if ((e as { name?: string })?.name === 'AbortError' || (e as { name?: string })?.name === 'TimeoutError' || init?.signal?.aborted || e instanceof TypeError) throw e;
      throw new TypeError('fetch failed', { cause: e });
    }
  };
  return {
    fetch: f,
    // Workers: the platform's fetch leaves from Cloudflare's network (no private network or
    // metadata service behind it); the policy itself refuses literal private addresses.
    untrusted: (url, init) => f(url, init),
    async request(r) {
      const res = await f(r.url, { method: r.method, headers: r.headers, body: r.body as BodyInit | undefined, signal: r.signal ?? r.abort?.signal });
      const body = res.body;
      return {
        status: res.status,
        header: (n) => res.headers.get(n),
        body: body ? iterate(body, r.abort) : (async function* () {})(),
        bytes: async () => new Uint8Array(await res.arrayBuffer()),
        text: () => res.text(),
        cancel: () => void body?.cancel().catch(() => {}),
      };
    },
  };
}

async function* iterate(stream: ReadableStream<Uint8Array>, progress: AbortSource | undefined): AsyncIterable<Uint8Array> {
  const reader = stream.getReader();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        return;
      }
      progress?.touch?.();
      progress?.hold?.(); // until the consumer asks for more, a slow client is the one waited for
      yield value;
      progress?.touch?.(); // asked again: waiting on the upstream from now
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => {}); // the consumer stopped early
  }
}

// Whole answers made of bytes already in memory (a relayed JSON answer): the runtime can write
// them itself, head and body at once, with the headers it adds merged into the head (on Node
// that is writeHead with one object, Node's fast path, instead of a setHeader per header).
const WHOLE = Symbol('citygate.whole');
type WithWhole = Response & { [WHOLE]?: { bytes: Uint8Array; headers: Record<string, string> } };

/** A Response of `bytes`, remembered for wholeBodyOf. Its headers must not be changed afterwards. */
export function wholeResponse(bytes: Uint8Array, init: { status: number; headers: Record<string, string> }): Response {
  const res: WithWhole = new Response(bytes as Uint8Array<ArrayBuffer>, init);
  res[WHOLE] = { bytes, headers: init.headers };
  return res;
}

/** What a response was made with by wholeResponse, else null. */
export function wholeBodyOf(res: Response): { bytes: Uint8Array; headers: Record<string, string> } | null {
  return (res as WithWhole)[WHOLE] ?? null;
}

// Streamed responses: the runtime can take the body back without going through
// `Response.body` (on Node, @hono/node-server's lightweight Response builds a full Response
// object the first time .body is read). A body given as chunks (an async iterable) still gets
// a web ReadableStream over it, which Workers read; the Node runtime reads the chunks straight
// from their source instead, without a web stream's promise machinery per chunk.
// It is kept on the Response itself (a symbol-keyed property): a WeakMap entry per streamed
// call costs the garbage collector several times more.
const SOURCE = Symbol('citygate.streamSource');
type WithSource = Response & { [SOURCE]?: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> };

/** How a runtime that writes streamed responses itself makes them (runtimes/node/streamed-response.ts). */
export type StreamedResponses = (body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>, init: ResponseInit) => Response;
let streamed: StreamedResponses | null = null;

/**
 * Set once by a runtime that writes every streamed response from its source (Node): it makes
 * them, as Responses whose web stream is built only if something reads `body`. Unset (Workers,
 * or a gateway without its runtime), they are made as below.
 */
export function makeStreamedResponsesWith(make: StreamedResponses | null): void {
  streamed = make;
}

/**
 * A Response whose body is `body`, remembered for streamSourceOf. Chunks from an iterable are
 * read one per pull; the iterator's return() is called when the reader stops early (the client
 * went away), even before the first read.
 */
export function streamingResponse(body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>, init: ResponseInit): Response {
  const res: WithSource = streamed ? streamed(body, init) : new Response(body instanceof ReadableStream ? body : readableFrom(body), init);
  res[SOURCE] = body;
  return res;
}

/** What a response was made with by streamingResponse (a stream or the chunks' source), else null. */
export function streamSourceOf(res: Response): ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | null {
  return (res as WithSource)[SOURCE] ?? null;
}

/** A web stream over chunks (a pull reads one). */
export function readableFrom(src: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const it = src[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const r = await it.next();
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      },
      async cancel(reason) {
        await it.return?.(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
