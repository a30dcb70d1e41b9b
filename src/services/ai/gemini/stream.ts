// streamGenerateContent: Google streams GenerateContentResponses, with `alt=sse` as SSE `data:`
// events, without it as one JSON array whose elements arrive as they are made. citygate asks a
// Google upstream for SSE always and re-frames for a client that asked for the array; a
// translated stream is written as the same events.
import { GatewayError } from '../../../kernel/errors.ts';
import { streamingResponse } from '../../../kernel/http.ts';
import type { StreamWriter, Used } from '../upstream/sdk-call.ts';
import { googleErrorEvent } from './errors.ts';
import { candidate, finishReason, usageMetadata, type ResponseMeta } from './output.ts';

const event = (data: object) => `data: ${JSON.stringify(data)}\r\n\r\n`;

/**
 * An AI SDK stream as Gemini events. Google's last event carries the finish reason and the
 * usage along with the last piece of the answer (clients such as Gemini CLI take an event
 * without a part as invalid), so each piece waits for the next before it is written.
 */
export function geminiStream(meta: ResponseMeta): StreamWriter {
  let held: object | null = null;
  const response = (part: object, finish?: string, used?: Used) => ({
    candidates: [candidate([part], finish)],
    ...(used ? { usageMetadata: usageMetadata(used) } : {}),
    modelVersion: meta.model,
    responseId: meta.responseId,
  });
  const hold = (part: object) => {
    const out = held ? event(response(held)) : '';
    held = part;
    return out;
  };
  return {
    start: () => '',
    part(p) {
      if (p.type === 'text-delta' && p.text) return hold({ text: p.text });
      if (p.type === 'tool-call') return hold({ functionCall: { id: p.toolCallId, name: p.toolName, args: p.input ?? {} } });
      return '';
    },
    end: (used, finish) => event(response(held ?? { text: '' }, finishReason(finish), used)),
    error: (e: GatewayError) => (held ? event(response(held)) : '') + googleErrorEvent(e),
  };
}

const enc = new TextEncoder();

/** SSE `data:` events → the JSON-array stream (`[{…}\r\n,{…}]`), element by element as they come. */
export function sseToJsonArray(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const dec = new TextDecoder();
  let text = '';
  let first = true;
  const flush = (controller: TransformStreamDefaultController<Uint8Array>, last: boolean) => {
    text = text.replace(/\r\n?/g, '\n');
    let out = '';
    for (let i = text.indexOf('\n\n'); i !== -1 || (last && text.trim()); i = text.indexOf('\n\n')) {
      const ev = i === -1 ? text : text.slice(0, i);
      text = i === -1 ? '' : text.slice(i + 2);
      const data = ev
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (!data) continue;
      out += (first ? '[' : '\r\n,') + data;
      first = false;
    }
    if (out) controller.enqueue(enc.encode(out));
  };
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        text += dec.decode(chunk, { stream: true });
        flush(controller, false);
      },
      flush(controller) {
        text += dec.decode();
        flush(controller, true);
        controller.enqueue(enc.encode(first ? '[]' : ']'));
      },
    }),
  );
}

/** A stream response re-framed as the JSON array (content type application/json). */
export function asJsonArray(res: Response): Response {
  if (!res.body || !res.ok) return res;
  const headers = new Headers(res.headers);
  headers.set('content-type', 'application/json; charset=utf-8');
  headers.delete('content-length');
  return streamingResponse(sseToJsonArray(res.body), { status: res.status, headers });
}
