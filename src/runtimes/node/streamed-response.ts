// Streamed responses as the Node runtime makes them. The runtime writes every streamed response
// itself, from its source (event-stream.ts), so the web stream over the chunks and the Headers
// object a Response would make are wasted on nearly every call: here both are made only if
// something reads them (a middleware that copies the response, a browser's CORS headers, a test
// that reads the body), and the runtime writes the plain headers the response was made with when
// nothing read them. Measured: about 5 % of a streamed call's CPU (bench/pair.ts, 2026-11-29).
import { makeStreamedResponsesWith, readableFrom } from '../../kernel/http.ts';

type Source = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;
const UNTOUCHED = Symbol('citygate.untouchedHeaders');

/**
 * Streamed responses are made by this runtime from now on. Called after the server adapter
 * started: they extend the Response class in use then (@hono/node-server's lightweight one).
 */
export function installStreamedResponses(): void {
  const Base = globalThis.Response;
  class NodeStreamedResponse extends Base {
    #source: Source;
    #stream: ReadableStream<Uint8Array> | null = null;
    /** A whole Response over the stream, once a method that reads the body was called. */
    #full: Response | null = null;
    [UNTOUCHED]: Record<string, string> | null;

    constructor(source: Source, init: ResponseInit) {
      super(null, init);
      this.#source = source;
      const h = init.headers;
      // only a plain object of names and values is written as it is
      this[UNTOUCHED] = h && typeof h === 'object' && Object.getPrototypeOf(h) === Object.prototype ? (h as Record<string, string>) : null;
    }

    override get headers(): Headers {
      this[UNTOUCHED] = null; // whoever reads them may change them: the runtime reads them too
      return super.headers;
    }

    override get body(): ReadableStream<Uint8Array<ArrayBuffer>> {
      if (this.#full) return this.#full.body!;
      this.#stream ??= this.#source instanceof ReadableStream ? this.#source : readableFrom(this.#source);
      return this.#stream as ReadableStream<Uint8Array<ArrayBuffer>>;
    }

    override get bodyUsed(): boolean {
      return this.#full ? this.#full.bodyUsed : (this.#stream?.locked ?? false);
    }

    #whole(): Response {
      return (this.#full ??= new Base(this.body, { status: this.status, statusText: this.statusText, headers: this.headers }));
    }
    override arrayBuffer(): Promise<ArrayBuffer> {
      return this.#whole().arrayBuffer();
    }
    override blob(): Promise<Blob> {
      return this.#whole().blob();
    }
    override bytes(): Promise<Uint8Array<ArrayBuffer>> {
      return this.#whole().bytes();
    }
    override formData(): Promise<FormData> {
      return this.#whole().formData();
    }
    override json(): Promise<unknown> {
      return this.#whole().json();
    }
    override text(): Promise<string> {
      return this.#whole().text();
    }
    override clone(): Response {
      return this.#whole().clone();
    }
  }
  makeStreamedResponsesWith((source, init) => new NodeStreamedResponse(source, init));
}

/** The headers a streamed response was made with, if nothing has read them since; else null. */
export function untouchedHeaders(res: Response): Record<string, string> | null {
  return (res as { [UNTOUCHED]?: Record<string, string> | null })[UNTOUCHED] ?? null;
}
