// The three steps a relayed upstream answer takes, shared by the chat pass-through
// (chat/passthrough.ts) and the forwarded Responses/Messages/embeddings calls (forward.ts).
import { wholeResponse, type UpstreamResponse } from '../../../kernel/http.ts';
import type { GatewayContext } from '../../../kernel/context.ts';
import type { AiCall, Usage } from '../meter.ts';
import { UpstreamStatusError, type Deadline } from './errors.ts';

const dec = new TextDecoder();

/** An error status, thrown as the upstream's (route() retries 5xx, 429 and refused keys). */
export function statusError(res: UpstreamResponse, bytes: Uint8Array): UpstreamStatusError {
  const ms = res.header('retry-after-ms');
  return new UpstreamStatusError(res.status, dec.decode(bytes), ms ? String(Number(ms) / 1000) : (res.header('retry-after') ?? undefined));
}

/** A whole (non-streamed) answer: relayed as is; the call is finished once routing is done. */
export function bufferedAnswer(gw: GatewayContext, call: AiCall, res: UpstreamResponse, bytes: Uint8Array, used: Usage): () => Response {
  const type = res.header('content-type') ?? 'application/json';
  return () => {
    // finished here, once routing is done, so the record's overhead is the response's
    gw.waitUntil(call.finish('ok', used));
    return wholeResponse(bytes, { status: res.status, headers: { 'content-type': type } });
  };
}

/**
 * Reads a stream up to its first non-empty chunk, as part of the attempt: an upstream that sends
 * headers and then nothing (or breaks) before its first byte is still retried elsewhere. Stops
 * the deadline's timer once it has it; `rest` goes on after `head`.
 */
export async function firstChunk(res: UpstreamResponse, d: Deadline): Promise<{ head: Uint8Array; rest: AsyncIterator<Uint8Array> }> {
  const rest = res.body[Symbol.asyncIterator]();
  let first = await rest.next();
  while (!first.done && first.value.length === 0) first = await rest.next();
  if (first.done) throw new UpstreamStatusError(502, 'the upstream ended the stream before its first event');
  d.stopTimer();
  return { head: first.value, rest };
}
