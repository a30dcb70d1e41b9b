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
import { AiCall, byteLength, estimateFromEvents, estimateFromText, type Usage } from '../meter.ts';
import { upstreamTimeoutMs, type Resolved } from '../resolve.ts';
import { CLIENT_CLOSED, deadline, fromUpstreamStatus, toGatewayError } from '../upstream-errors.ts';
import { relaySse, type ChatUsage } from './sse.ts';
import { reservationFor, type ChatInput } from './input.ts';

const enc = new TextEncoder();
const dec = new TextDecoder();
const USAGE_OPTION = enc.encode('{"stream_options":{"include_usage":true},');

export function usageToMeasured(u: ChatUsage | null | undefined): Partial<Measured> {
  if (!u) return {};
  return {
    input_tokens: num(u.prompt_tokens),
    output_tokens: num(u.completion_tokens),
    cached_tokens: num(u.prompt_tokens_details?.cached_tokens),
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

export async function passthrough(ctx: ActionContext<ChatInput>, r: Resolved, url: string): Promise<Response> {
  const { input, gateway: gw, timing } = ctx;
  const raw = await ctx.rawBody();
  const call = AiCall.start(gw, ctx.identity, r.model, 'compat', ctx.requestId, ctx.timing);
  await call.reserve(reservationFor(input, r.model, raw.byteLength));

  const stream = input.stream === true;
  const clientWantsUsage = input.stream_options?.include_usage === true;
  let body: Uint8Array | string = raw;
  if (input.model !== r.model.upstream || input.city_id !== undefined || (stream && !clientWantsUsage && input.stream_options != null)) {
    const copy: Record<string, unknown> = { ...input, model: r.model.upstream };
    delete copy.city_id; // citygate's, not the upstream's
    if (stream) copy.stream_options = { ...(input.stream_options ?? {}), include_usage: true };
    body = JSON.stringify(copy);
  } else if (stream && !clientWantsUsage) {
    body = withUsageOption(raw);
  }

  const d = deadline(ctx.signal, upstreamTimeoutMs(gw));
  const t0 = performance.now();
  const fail = async (e: unknown): Promise<never> => {
    d.clear();
    const ge = toGatewayError(e, d);
    await call.finish(ge.code === CLIENT_CLOSED ? 'aborted' : 'error', {}, ge.code);
    throw ge;
  };
  let res;
  try {
    res = await gw.http.request({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json', ...r.adapter.authHeaders(r.provider) },
      body,
      signal: d.signal,
    });
  } catch (e) {
    timing.upstreamMs += performance.now() - t0;
    return fail(e);
  }

  if (res.status >= 400 || !stream) {
    let bytes: Uint8Array;
    try {
      bytes = await res.bytes();
    } catch (e) {
      timing.upstreamMs += performance.now() - t0;
      return fail(e);
    }
    timing.upstreamMs += performance.now() - t0;
    d.clear();
    if (res.status >= 400) {
      const ge = fromUpstreamStatus(res.status, dec.decode(bytes));
      await call.finish('error', {}, ge.code);
      throw ge;
    }
    let used: Usage;
    try {
      const json = JSON.parse(dec.decode(bytes)) as { usage?: ChatUsage; choices?: unknown };
      used = json.usage ? usageToMeasured(json.usage) : estimateFromText(raw.byteLength, replyBytes(json.choices));
    } catch {
      // not JSON: forwarded as is; charged as if it all were reply text
      used = estimateFromText(raw.byteLength, bytes.byteLength);
    }
    gw.waitUntil(call.finish('ok', used));
    return new Response(bytes as Uint8Array<ArrayBuffer>, { status: res.status, headers: { 'content-type': res.header('content-type') ?? 'application/json' } });
  }

  timing.upstreamMs += performance.now() - t0;
  d.stopTimer();
  const out = relaySse(res.body, {
    strip: !clientWantsUsage,
    errorEvent: (e) => openaiErrorEvent(toGatewayErrorSafe(e, d)),
    onEnd({ usage, events, aborted, error }) {
      d.clear();
      const gone = aborted || ctx.signal.aborted;
      if (usage) {
        gw.waitUntil(call.finish(gone ? 'aborted' : error ? 'error' : 'ok', usageToMeasured(usage)));
        return;
      }
      // No usage reported (an abort before the usage event, or an upstream that never sends
      // it): the documented estimate (meter.ts).
      const estimate = estimateFromEvents(raw.byteLength, events);
      gw.waitUntil(call.finish(gone ? 'aborted' : error ? 'error' : 'ok', estimate, gone ? CLIENT_CLOSED : error ? 'upstream_stream_failed' : undefined));
    },
  });
  return streamingResponse(out, {
    status: 200,
    headers: { 'content-type': res.header('content-type') ?? 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' },
  });
}

function toGatewayErrorSafe(e: unknown, d: ReturnType<typeof deadline>): GatewayError {
  try {
    return toGatewayError(e, d);
  } catch {
    return new GatewayError(502, 'upstream_stream_failed', 'The upstream stream broke off.');
  }
}
