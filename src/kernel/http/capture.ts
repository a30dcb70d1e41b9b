// Request logs, the kernel's part: for an action that calls a model (ActionDef.requestLog) and
// a caller whose mode is not 'off', keep what the request and its answer were while they pass,
// and hand them to the keeper (kernel/request-log.ts) once the answer has ended. Off, the cost
// is one mode lookup per call: nothing here is allocated.
//
// A whole answer (JSON) is kept by reference (its bytes or its object); a streamed one's chunks
// are kept by reference as they go out (full mode; metadata counts their bytes), and assembled
// into the answer (kernel/stream-assembly.ts) by the keeper, after the response. Beyond the
// list of the headers, nothing is copied, parsed or redacted on the request's path.
import type { Context } from 'hono';
import type { GatewayContext } from '../context.ts';
import type { GatewayError } from '../errors.ts';
import { bearer, type Identity } from '../identity.ts';
import { streamingResponse, streamSourceOf, wholeBodyOf } from '../http.ts';
import { REQUEST_LOGS, type CapturedCall, type RequestLogKeeper } from '../request-log.ts';
import type { AnyAction, RequestTiming } from '../service.ts';
import { knownAnswer } from './errors.ts';

/** Bytes of a streamed answer kept (by reference) for its assembly at most; beyond, marked truncated. */
const MAX_STREAM_KEPT = 8 * 1024 * 1024;

/** The keeper and the mode for this call, or null when it is not logged. */
export function logModeOf(context: GatewayContext, identity: Identity): Promise<'metadata' | 'full' | null> | 'metadata' | 'full' | null {
  const keeper = context.use<RequestLogKeeper>(REQUEST_LOGS);
  if (!keeper) return null;
  const m = keeper.mode(identity);
  if (m instanceof Promise) return m.then((v) => (v === 'off' ? null : v));
  return m === 'off' ? null : m;
}

export class Capture {
  readonly #keeper: RequestLogKeeper;
  readonly #call: CapturedCall;
  readonly #started: number;
  readonly #formatError: ((e: GatewayError) => Response) | undefined;
  /** The request body, once the action has read it. */
  body: (() => Promise<Uint8Array> | null) | null = null;
  #sent = false;

  constructor(context: GatewayContext, action: Pick<AnyAction, 'requestLog' | 'formatError'>, mode: 'metadata' | 'full', c: Context, identity: Identity, requestId: string, route: string) {
    const req = c.req.raw;
    const spec = action.requestLog ?? {};
    this.#formatError = action.formatError?.bind(action);
    const timing = c.get('timing' as never) as RequestTiming | undefined;
    this.#keeper = context.use<RequestLogKeeper>(REQUEST_LOGS)!;
    this.#started = timing?.startedAt ?? performance.now();
    const headers: [string, string][] = [];
    req.headers.forEach((v, k) => void headers.push([k, v]));
    this.#call = {
      mode,
      requestId,
      identity,
      credential: bearer(req) || req.headers.get('x-api-key') || req.headers.get('x-goog-api-key'),
      route,
      method: req.method,
      url: req.url,
      receivedAt: Date.now() - (performance.now() - this.#started),
      request: { headers, bytes: Number(req.headers.get('content-length') ?? 0) || 0, body: null },
      response: { status: 0, headers: [], bytes: 0, stream: false, headMs: 0, endMs: 0, ended: 'ok' },
    };
    if (spec.assemble) this.#call.assemble = spec.assemble;
  }

  #now(): number {
    return Math.round((performance.now() - this.#started) * 100) / 100;
  }

  /** Runs the action; its answer (or its error) is captured on the way out. */
  async around(run: () => Promise<Response>, result: { value?: unknown }): Promise<Response> {
    let res: Response;
    try {
      res = await run();
    } catch (e) {
      await this.#requestBody();
      this.#failed(e);
      throw e;
    }
    await this.#requestBody();
    return this.#answer(res, result.value);
  }

  /** An error the kernel answers: logged as the caller sees it (its API's error shape). */
  #failed(e: unknown): void {
    const err = knownAnswer(e); // the very answer the caller gets (the kernel counts the outage itself)
    const r = this.#call.response;
    r.status = err?.status ?? 500;
    r.headMs = r.endMs = this.#now();
    r.ended = 'error';
    this.#call.error = { code: err?.code ?? 'internal_error', message: err?.message ?? 'internal error' };
    if (!err) return this.#send();
    const res = this.#formatError ? this.#formatError(err) : err.toResponse();
    res.headers.forEach((v, k) => void r.headers.push([k, v]));
    res.arrayBuffer().then(
      (b) => {
        r.bytes = b.byteLength;
        r.body = { bytes: new Uint8Array(b) };
        this.#send();
      },
      () => this.#send(),
    );
  }

  async #requestBody(): Promise<void> {
    const read = this.body?.();
    if (!read) return;
    try {
      const b = await read;
      this.#call.request.body = b;
      this.#call.request.bytes = b.byteLength;
    } catch {
      /* the body was refused (too large): its size is what the header said */
    }
  }

  #answer(res: Response, value: unknown): Response {
    const r = this.#call.response;
    r.status = res.status;
    res.headers.forEach((v, k) => void r.headers.push([k, v]));
    r.headMs = this.#now();
    const whole = wholeBodyOf(res);
    if (whole) {
      r.bytes = whole.bytes.byteLength;
      r.body = { bytes: whole.bytes };
      return this.#finish(res);
    }
    const source = streamSourceOf(res);
    if (source) return this.#tapped(res, source);
    if (value !== undefined) {
      // an object the kernel answered as JSON
      r.body = { json: value };
      r.bytes = Number(res.headers.get('content-length') ?? 0) || 0;
      return this.#finish(res);
    }
    const type = res.headers.get('content-type') ?? '';
    if (res.body && /json|text|event-stream/.test(type)) {
      // a Response of its own: read a copy in the background
      const copy = res.clone();
      copy.arrayBuffer().then(
        (b) => {
          r.bytes = b.byteLength;
          r.body = { bytes: new Uint8Array(b) };
          r.endMs = this.#now();
          this.#send();
        },
        () => {
          r.ended = 'aborted';
          this.#send();
        },
      );
      return res;
    }
    // binary (audio): its size only
    r.bytes = Number(res.headers.get('content-length') ?? 0) || 0;
    return this.#finish(res);
  }

  #finish(res: Response): Response {
    this.#call.response.endMs = this.#now();
    this.#send();
    return res;
  }

  #send(): void {
    if (this.#sent) return;
    this.#sent = true;
    this.#keeper.write(this.#call);
  }

  /** The same answer, its chunks kept (by reference) as they pass. */
  #tapped(res: Response, source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): Response {
    const r = this.#call.response;
    r.stream = true;
    const sse = /event-stream/.test(res.headers.get('content-type') ?? '');
    const keep = this.#call.mode === 'full';
    const chunks: Uint8Array[] = [];
    let kept = 0;
    let truncated = false;
    const end = (how: 'ok' | 'aborted' | 'error') => {
      if (this.#sent) return;
      r.ended = how;
      r.endMs = this.#now();
      if (keep) r.body = { chunks, sse, truncated };
      this.#send();
    };
    // status and headers read before the source is: a runtime's lazy Response may build itself from its body
    const init = { status: res.status, headers: res.headers };
    const src = iteratorOf(source);
    const body: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]: () => ({
        async next() {
          try {
            const n = await src.next();
            if (n.done) end('ok');
            else {
              r.bytes += n.value.byteLength;
              if (keep) {
                if (kept < MAX_STREAM_KEPT) {
                  chunks.push(n.value); // a chunk is not written to once it has been handed on
                  kept += n.value.byteLength;
                } else truncated = true;
              }
            }
            return n;
          } catch (e) {
            end('error');
            throw e;
          }
        },
        async return(v?: unknown) {
          end('aborted');
          return (await src.return?.(v)) ?? { done: true, value: undefined };
        },
      }),
    };
    return streamingResponse(body, init);
  }
}

function iteratorOf(source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): AsyncIterator<Uint8Array> {
  if (!(source instanceof ReadableStream)) return source[Symbol.asyncIterator]();
  const reader = source.getReader();
  return {
    next: () => reader.read() as Promise<IteratorResult<Uint8Array>>,
    return: async (v?: unknown) => {
      await reader.cancel(v).catch(() => {});
      return { done: true, value: undefined };
    },
  };
}
