// Streamed responses (server-sent events) on Node, written by the runtime itself instead of
// @hono/node-server's generic stream path. That path sends the headers on their own (one write
// syscall and one TCP segment per stream) before the first chunk, then each chunk, then the end.
// Here the headers wait for the first chunk and go out with it; a stream that ends within the
// same turn of the event loop goes out in one write. After the first chunk, every chunk is
// written as soon as it is read.
//
// A client that goes away cancels the body (which aborts the upstream request), as before; the
// server adapter also still aborts the request's signal. A body made from chunks (an async
// iterable, kernel/http.ts) is read from that source, without the web stream over it.
import type { ServerResponse } from 'node:http';
import { streamSourceOf } from '../../kernel/http.ts';

/** Tells @hono/node-server that the response was written already (its documented escape hatch). */
const ALREADY_SENT_HEADER = 'x-hono-already-sent';
let alreadySent: Response | null = null;
export function alreadySentResponse(): Response {
  if (!alreadySent) {
    alreadySent = new Response(null, { headers: { [ALREADY_SENT_HEADER]: 'true' } });
    // node-server's lightweight Response would take its cached-body path, which writes again:
    // reading .body turns it into a plain Response (a no-op for a real one).
    void alreadySent.body;
  }
  return alreadySent;
}

/** A stream made by streamingResponse (every event stream citygate sends is): other responses' headers are not even read. */
export function isEventStream(res: Response): boolean {
  return streamSourceOf(res) !== null && res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
}

/** Writes the response to `out` and resolves (never rejects) once it is done or abandoned. */
export async function writeEventStream(res: Response, out: ServerResponse, added?: Record<string, string>): Promise<Response> {
  const source = streamSourceOf(res) ?? res.body;
  // the headers the gateway added first: the Response's own win on a clash
  const headers: Record<string, string | string[]> = added ? { ...added } : {};
  for (const [k, v] of res.headers) if (k !== 'set-cookie') headers[k] = v;
  const cookies = res.headers.getSetCookie();
  if (cookies.length) headers['set-cookie'] = cookies;
  if (!source) {
    out.writeHead(res.status, headers).end();
    return alreadySentResponse();
  }
  const reader = chunksOf(source);
  let gone = false;
  const onGone = () => {
    if (out.writableFinished) return;
    gone = true;
    reader.cancel();
  };
  out.on('close', onGone);
  out.on('error', onGone);
  try {
    let r = await reader.read();
    if (gone) return alreadySentResponse();
    if (!r.done) {
      // A stream that also ends within this turn of the event loop (a short answer that arrived
      // whole) goes out in one write: headers, body and end. Otherwise the first chunk waits at
      // most until the loop's check phase (setImmediate), and later chunks do not wait at all.
      const next = reader.read();
      next.catch(() => {}); // awaited below unless the client left first
      let immediate: ReturnType<typeof setImmediate> | undefined;
      const early = await Promise.race([next, new Promise<null>((resolve) => (immediate = setImmediate(resolve, null)))]);
      clearImmediate(immediate);
      if (gone) return alreadySentResponse();
      if (early?.done) {
        out.writeHead(res.status, headers).end(r.value);
        return alreadySentResponse();
      }
      out.writeHead(res.status, headers);
      if (!out.write(r.value)) await drained(out);
      if (gone) return alreadySentResponse();
      r = early ?? (await next);
      if (gone) return alreadySentResponse();
    } else out.writeHead(res.status, headers);
    while (!r.done) {
      if (!out.write(r.value)) await drained(out);
      if (gone) return alreadySentResponse();
      r = await reader.read();
      if (gone) return alreadySentResponse();
    }
    out.end();
  } catch (e) {
    // the body failed (the relay turns upstream failures into an error event, so this is rare)
    if (!out.headersSent) out.writeHead(500, { 'content-type': 'text/plain' }).end('stream failed');
    else out.destroy(e instanceof Error ? e : new Error(String(e)));
    reader.cancel();
  } finally {
    out.off('close', onGone);
    out.off('error', onGone);
  }
  return alreadySentResponse();
}

interface Chunks {
  read(): Promise<IteratorResult<Uint8Array>>;
  /** The reader stops early: lets the source go (never throws). */
  cancel(): void;
}

function chunksOf(source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): Chunks {
  if (source instanceof ReadableStream) {
    const reader = source.getReader();
    return { read: () => reader.read() as Promise<IteratorResult<Uint8Array>>, cancel: () => void reader.cancel().catch(() => {}) };
  }
  const it = source[Symbol.asyncIterator]();
  return {
    read: () => it.next(),
    cancel() {
      try {
        it.return?.()?.catch(() => {});
      } catch {
        /* the source is gone either way */
      }
    },
  };
}

function drained(out: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      out.off('drain', done);
      out.off('close', done);
      resolve();
    };
    out.on('drain', done);
    out.on('close', done);
  });
}
