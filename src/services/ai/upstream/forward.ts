// Forwarding a client API to an upstream that speaks it natively (embeddings to an
// OpenAI-compatible API, the Responses API to OpenAI, the Messages API to Anthropic): the body
// goes out as sent (model id rewritten, city_id dropped), the answer comes back byte for byte,
// and usage is read on the way — from the JSON answer, or from the few stream events that
// carry it. The caller has already reserved the worst case on `call`; this settles it once.
import { GatewayError } from '../../../kernel/errors.ts';
import { streamingResponse } from '../../../kernel/http.ts';
import type { Measured } from '../../../kernel/metering.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { BYTES_PER_TOKEN, type AiCall, type Usage } from '../meter.ts';
import type { Target } from '../routing/route.ts';
import { bufferedAnswer, firstChunk, statusError } from './answer.ts';
import { CLIENT_CLOSED, toGatewayError, type Deadline } from './errors.ts';

export interface ForwardSpec {
  url: string;
  body: string | Uint8Array;
  stream: boolean;
  /** Extra request headers (besides content-type, accept and the provider's auth). */
  headers?: Record<string, string>;
  /** Usage of a JSON answer. */
  usageOfJson(answer: any): Partial<Measured>;
  /** Stream events (by type) that carry usage, and how to fold each into the running usage. */
  usageEvents?: Record<string, (data: any, acc: Partial<Measured>) => void>;
  /** The event types that carry the final usage (a stream without one was cut short). */
  finalEvents?: string[];
  /**
   * Events without an `event:` line (Google's stream: every event a response): folds the
   * event's usage into the running usage; says 'final' for the one that ends the answer,
   * 'error' for an error the upstream reports inside the stream.
   */
  untypedEvent?: (data: any, acc: Partial<Measured>) => 'final' | 'error' | void;
  /** The SSE text of an error that breaks a stream off, in the API's own shape. */
  errorEvent(e: GatewayError): string;
  /** Bytes of the request, for the estimate when a stream ends without usage. */
  inputBytes: number;
}

const dec = new TextDecoder();
const enc = new TextEncoder();

/** The body as the upstream gets it: the upstream's model id, without citygate's city_id. */
export function upstreamBody(input: Record<string, unknown>, raw: Uint8Array, upstreamModel: string, extra: Record<string, unknown> = {}): string | Uint8Array {
  if (input.model === upstreamModel && input.city_id === undefined && Object.keys(extra).length === 0) return raw;
  const copy: Record<string, unknown> = { ...input, model: upstreamModel, ...extra };
  delete copy.city_id;
  return JSON.stringify(copy);
}

/**
 * One attempt (see routing/route.ts) against one upstream: returns once the upstream answered
 * (the whole JSON answer, or a stream's first chunk) and throws before that, so a failure is
 * retried on another upstream; an error status is thrown as the upstream's (retried when 5xx,
 * 429 or a refused key). What it returns makes the client's response and settles the call once.
 */
export async function forwardAttempt(ctx: ActionContext<unknown>, call: AiCall, t: Target, d: Deadline, spec: ForwardSpec): Promise<() => Response> {
  const { gateway: gw } = ctx;
  const res = await gw.http.request({
    method: 'POST',
    url: spec.url,
    headers: {
      'content-type': 'application/json',
      accept: spec.stream ? 'text/event-stream' : 'application/json',
      ...spec.headers,
      ...t.adapter.authHeaders(t.provider),
    },
    body: spec.body,
    abort: d,
  });

  if (res.status >= 400 || !spec.stream) {
    const bytes = await res.bytes();
    if (res.status >= 400) {
      throw statusError(res, bytes);
    }
    d.clear();
    let used: Usage = {};
    try {
      used = spec.usageOfJson(JSON.parse(dec.decode(bytes)));
    } catch {
      /* not JSON: relayed as is */
    }
    // An answer without usage: the input is estimated (meter.ts), the record says so.
    if (!used.input_tokens && !used.output_tokens) used = { input_tokens: Math.ceil(spec.inputBytes / BYTES_PER_TOKEN), estimated: true };
    return bufferedAnswer(gw, call, res, bytes, used);
  }

  const first = await firstChunk(res, d);
  const it = first.rest;
  let head: Uint8Array | null = first.head;
  const acc: Partial<Measured> = {};
  let sawUsage = false;
  let sawFinal = false;
  let failedInStream = false;
  let deltas = 0;
  let text = '';
  let ended = false;
  const scan = (chunk: Uint8Array, last: boolean) => {
    text += dec.decode(chunk, { stream: !last }).replace(/\r\n?/g, '\n');
    for (let i = text.indexOf('\n\n'); i !== -1 || (last && text.length > 0); i = text.indexOf('\n\n')) {
      const ev = i === -1 ? text : text.slice(0, i);
      text = i === -1 ? '' : text.slice(i + 2);
      const type = /^event:\s*(\S+)/m.exec(ev)?.[1];
      if (type?.endsWith('delta') && type !== 'message_delta') deltas++;
      if (type && spec.finalEvents?.includes(type)) sawFinal = true;
      const fold = type ? spec.usageEvents?.[type] : undefined;
      const untyped = type === undefined ? spec.untypedEvent : undefined;
      if (!fold && !untyped) continue;
      const data = ev
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      try {
        if (fold) {
          fold(JSON.parse(data), acc);
          sawUsage = true;
        } else if (data) {
          deltas++;
          const said = untyped!(JSON.parse(data), acc);
          if (acc.input_tokens) sawUsage = true;
          if (said === 'final') sawFinal = true;
          else if (said === 'error') failedInStream = true;
        }
      } catch {
        /* an unreadable usage event: the estimate below covers it */
      }
    }
  };
  const end = (how: 'ok' | 'aborted' | 'error', code?: string) => {
    if (ended) return;
    ended = true;
    d.clear();
    // A stream cut short before its final usage is charged the best estimate of what was
    // consumed: the input as reported (else ~4 bytes a token), at least one output token per
    // relayed delta.
    const used: Usage = sawFinal
      ? acc
      : { ...acc, input_tokens: sawUsage ? acc.input_tokens : Math.ceil(spec.inputBytes / BYTES_PER_TOKEN), output_tokens: Math.max(acc.output_tokens ?? 0, deltas), estimated: true };
    gw.waitUntil(call.finish(how, used, code));
  };
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (head) {
          scan(head, false);
          controller.enqueue(head);
          head = null;
          return;
        }
        let next: IteratorResult<Uint8Array>;
        try {
          next = await it.next();
        } catch (e) {
          if (ended) return;
          let ge: GatewayError;
          try {
            ge = toGatewayError(e, d);
          } catch {
            ge = new GatewayError(502, 'upstream_stream_failed', 'The upstream stream broke off.');
          }
          controller.enqueue(enc.encode(spec.errorEvent(ge)));
          controller.close();
          end(ctx.signal.aborted ? 'aborted' : 'error', ctx.signal.aborted ? CLIENT_CLOSED : d.expired ? ge.code : 'upstream_stream_failed');
          return;
        }
        if (next.done) {
          scan(new Uint8Array(0), true);
          controller.close();
          end(ctx.signal.aborted ? 'aborted' : failedInStream ? 'error' : 'ok', ctx.signal.aborted ? CLIENT_CLOSED : failedInStream ? 'upstream_stream_failed' : undefined);
          return;
        }
        scan(next.value, false);
        controller.enqueue(next.value);
      },
      async cancel() {
        d.abort();
        end('aborted', CLIENT_CLOSED);
        await it.return?.();
      },
    },
    { highWaterMark: 0 },
  );
  const type = res.header('content-type') ?? 'text/event-stream; charset=utf-8';
  return () => streamingResponse(body, { status: 200, headers: { 'content-type': type, 'cache-control': 'no-cache' } });
}
