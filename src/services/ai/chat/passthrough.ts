// chat/completions to an OpenAI-compatible upstream: the hot path. The request body goes out
// as the client sent it (re-serialised only when the model id must be rewritten), the
// response comes back byte for byte, and usage is read on the way.
//
// Streams: when the client did not ask for `stream_options.include_usage`, citygate asks the
// upstream for it (one small textual insertion into the body, no re-encoding) and removes the
// extra usage event from what the client sees (see sse.ts), so usage is always measured.
import type { ActionContext } from '../../../kernel/service.ts';
import { GatewayError } from '../../../kernel/errors.ts';
import { streamingResponse } from '../../../kernel/http.ts';
import type { Measured } from '../../../kernel/metering.ts';
import { byteLength, estimateFromEvents, estimateFromText, type AiCall, type Usage } from '../meter.ts';
import type { Target } from '../routing/route.ts';
import { CLIENT_CLOSED, toGatewayError, type Deadline } from '../upstream/errors.ts';
import { bufferedAnswer, firstChunk, statusError } from '../upstream/answer.ts';
import { chatUsageNumbers, topLevelObjectMember } from '../upstream/json-member.ts';
import { relaySse, type ChatUsage } from './sse.ts';
import type { ChatInput } from './input.ts';

const enc = new TextEncoder();
const dec = new TextDecoder();
const USAGE_OPTION = enc.encode('{"stream_options":{"include_usage":true},');

export function usageToMeasured(u: ChatUsage | null | undefined): Partial<Measured> {
  if (!u) return {};
  return {
    input_tokens: num(u.prompt_tokens),
    output_tokens: num(u.completion_tokens),
    cached_tokens: num(u.prompt_tokens_details?.cached_tokens),
    cache_write_tokens: num(u.prompt_tokens_details?.cache_write_tokens),
  };
}
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);

/** UTF-8 bytes of the text a chat completion returned (contents, refusals, tool-call arguments): the estimate's basis without usage. */
function replyBytes(choices: unknown): number {
  let n = 0;
  for (const c of Array.isArray(choices) ? choices : []) {
    const m = (c as { message?: Record<string, unknown> })?.message;
    if (!m) continue;
    if (typeof m.content === 'string') n += byteLength(m.content);
    if (typeof m.refusal === 'string') n += byteLength(m.refusal);
    for (const t of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
      const f = (t as { function?: { name?: unknown; arguments?: unknown } })?.function;
      if (typeof f?.arguments === 'string') n += byteLength(f.arguments);
      if (typeof f?.name === 'string') n += byteLength(f.name);
    }
  }
  return n;
}

/** By target (its upstream and key are fixed per target): the pass-through URL and request headers, built once, not per call. */
interface Plan {
  url: string | null;
  json: Record<string, string>;
  stream: Record<string, string>;
}
const plans = new WeakMap<Target, Plan>();

function planOf(t: Target): Plan {
  let p = plans.get(t);
  if (!p) {
    const auth = t.adapter.authHeaders(t.provider);
    p = {
      url: t.adapter.chatCompletionsUrl(t.provider),
      json: { 'content-type': 'application/json', accept: 'application/json', ...auth },
      stream: { 'content-type': 'application/json', accept: 'text/event-stream', ...auth },
    };
    plans.set(t, p);
  }
  return p;
}

/** The target's chat/completions URL when it is passed through (an OpenAI-compatible upstream), else null. */
export const passthroughUrl = (t: Target): string | null => planOf(t).url;

/**
 * What a JSON answer used: its top-level `usage` object, read from the bytes alone (json-member.ts:
 * the answer is relayed, never parsed whole; its numbers are read from the bytes too, or the
 * object alone is parsed when they are not plain integers); without one, the whole answer is parsed for the
 * estimate (the reply's text), and an answer that is not JSON is charged as if it all were reply text.
 */
function usageOfAnswer(raw: Uint8Array, bytes: Uint8Array): Usage {
  const u = topLevelObjectMember(bytes, 'usage');
  if (u) {
    const n = chatUsageNumbers(u);
    if (n) return n;
    try {
      return usageToMeasured(JSON.parse(dec.decode(u)) as ChatUsage);
    } catch {
      /* unreadable: as below */
    }
  }
  try {
    const json = JSON.parse(dec.decode(bytes)) as { usage?: ChatUsage; choices?: unknown };
    return json.usage ? usageToMeasured(json.usage) : estimateFromText(raw.byteLength, replyBytes(json.choices));
  } catch {
    return estimateFromText(raw.byteLength, bytes.byteLength);
  }
}

/** The body with `"stream_options":{"include_usage":true}` inserted after its first brace. */
function withUsageOption(raw: Uint8Array): Uint8Array {
  let i = 0;
  while (i < raw.length && raw[i] !== 123) i++;
  const out = new Uint8Array(USAGE_OPTION.length + raw.length - i - 1);
  out.set(USAGE_OPTION);
  out.set(raw.subarray(i + 1), USAGE_OPTION.length);
  return out;
}

function openaiErrorEvent(e: GatewayError): string {
  return `data: ${JSON.stringify(e.toJSON())}\n\n`;
}

/**
 * One attempt (see routing/route.ts): returns once the upstream answered — the whole JSON
 * answer, or a stream's first chunk — and throws before that, so a failure is retried on
 * another upstream. Once it returns, the client gets this upstream's answer.
 */
export async function passthroughAttempt(
  ctx: ActionContext<ChatInput>,
  call: AiCall,
  raw: Uint8Array,
  t: Target,
  url: string,
  d: Deadline,
): Promise<() => Response | Promise<Response>> {
  const { input, gateway: gw } = ctx;
  const stream = input.stream === true;
  const clientWantsUsage = input.stream_options?.include_usage === true;
  let body: Uint8Array | string = raw;
  if (input.model !== t.upstreamModel || input.city_id !== undefined || (stream && !clientWantsUsage && input.stream_options != null)) {
    const copy: Record<string, unknown> = { ...input, model: t.upstreamModel };
    delete copy.city_id; // citygate's, not the upstream's
    if (stream) copy.stream_options = { ...(input.stream_options ?? {}), include_usage: true };
    body = JSON.stringify(copy);
  } else if (stream && !clientWantsUsage) {
    body = withUsageOption(raw);
  }

  const res = await gw.http.request({
    method: 'POST',
    url,
    headers: stream ? planOf(t).stream : planOf(t).json,
    body,
    abort: d,
  });

  if (res.status >= 400 || !stream) {
    const bytes = await res.bytes();
    if (res.status >= 400) {
      throw statusError(res, bytes);
    }
    d.clear();
    return bufferedAnswer(gw, call, res, bytes, usageOfAnswer(raw, bytes));
  }

  const { head, rest: it } = await firstChunk(res, d);
  const src: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator]() {
      let sent = false;
      return {
        next: () => (sent ? it.next() : ((sent = true), Promise.resolve({ done: false, value: head }))),
        return: (v?: unknown) => it.return?.(v) ?? Promise.resolve({ done: true, value: undefined }),
      } as AsyncIterator<Uint8Array>;
    },
  };
  const type = res.header('content-type') ?? 'text/event-stream; charset=utf-8';
  return () => {
    const out = relaySse(src, {
      strip: !clientWantsUsage,
      errorEvent: (e) => openaiErrorEvent(toGatewayErrorSafe(e, d)),
      onEnd({ usage, events, aborted, error }) {
        const gone = aborted || ctx.signal.aborted;
        // ended by our own deadline (idle, or the gateway stopping): its code, else a break
        const failed = gone ? CLIENT_CLOSED : error ? (d.expired ? toGatewayErrorSafe(error, d).code : 'upstream_stream_failed') : undefined;
        d.clear();
        if (usage) {
          gw.waitUntil(call.finish(gone ? 'aborted' : error ? 'error' : 'ok', usageToMeasured(usage), failed));
          return;
        }
        // No usage reported (an abort or a break before the usage event, or an upstream that
        // never sends it): the documented estimate (meter.ts).
        const estimate = estimateFromEvents(raw.byteLength, events);
        gw.waitUntil(call.finish(gone ? 'aborted' : error ? 'error' : 'ok', estimate, failed));
      },
    });
    return streamingResponse(out, { status: 200, headers: { 'content-type': type, 'cache-control': 'no-cache' } });
  };
}

function toGatewayErrorSafe(e: unknown, d: Deadline): GatewayError {
  try {
    return toGatewayError(e, d);
  } catch {
    return new GatewayError(502, 'upstream_stream_failed', 'The upstream stream broke off.');
  }
}
