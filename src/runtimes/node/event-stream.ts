// Streamed responses (server-sent events) on Node, written by the runtime itself instead of
// @hono/node-server's generic stream path. That path sends the headers on their own (one write
// syscall and one TCP segment per stream) before the first chunk, then each chunk, then the end.
// Here the headers go out with the first chunk. Node corks a chunked write until the next tick,
// and the upstream client (upstream-http.ts) knows a body's end as soon as its bytes are in, so
// a stream that arrived whole (a short answer) goes out in one write: headers, body and end.
// Later chunks are written as soon as they are read. (An earlier version waited for the loop's
// check phase, setImmediate, before the first write to get the one write; the cork gives it for
// less: ~2 % of a streamed call's CPU, bench/pair.ts, 2026-11-29.)
//
// A client that goes away cancels the body (which aborts the upstream request), as before; the
// server adapter also still aborts the request's signal. A body made from chunks (an async
// iterable, kernel/http.ts) is read from that source, without the web stream over it.
import type { ServerResponse } from 'node:http';
import { streamSourceOf } from '../../kernel/http.ts';
import { untouchedHeaders } from './streamed-response.ts';

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

/**
 * A response made by streamingResponse (every event stream citygate sends is, and every other
 * streamed body): the runtime writes all of them, since the ones it makes (streamed-response.ts)
 * have a web stream only if something asks for it.
 */
export function isStreamed(res: Response): boolean {
  return streamSourceOf(res) !== null;
}

/** Writes a response isStreamed() answered true for to `out`; resolves (never rejects) once it is done or abandoned. */
export async function writeStreamed(res: Response, out: ServerResponse, added?: Record<string, string>): Promise<Response> {
  const source = streamSourceOf(res)!;
  // the headers the gateway added first: the Response's own win on a clash
  const plain = untouchedHeaders(res);
  let headers: Record<string, string | string[]>;
  if (plain) headers = added ? { ...added, ...plain } : plain;
  else {
    headers = added ? { ...added } : {};
    for (const [k, v] of res.headers) if (k !== 'set-cookie') headers[k] = v;
    const cookies = res.headers.getSetCookie();
    if (cookies.length) headers['set-cookie'] = cookies;
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
    out.writeHead(res.status, headers); // sent with the first chunk (a body that fails before it gets a 500)
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
