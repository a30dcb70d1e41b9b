// POST /v1/ai/messages and /v1/ai/messages/count_tokens: the Anthropic Messages API (also at
// /v1/ai/v1/messages…, where the Anthropic SDK and Claude Code send it). Forwarded to
// Anthropic upstreams, translated through the AI SDK onto every other upstream.
import type { Measured } from '../../../kernel/metering.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { GatewayError } from '../../../kernel/errors.ts';
import { forward, upstreamBody } from '../forward.ts';
import { AiCall } from '../meter.ts';
import { resolveModel, upstreamTimeoutMs } from '../resolve.ts';
import { sdkGenerate, sdkStream } from '../sdk-call.ts';
import { deadline, fromUpstreamStatus, toGatewayError } from '../upstream-errors.ts';
import { anthropicErrorEvent } from './errors.ts';
import { estimateTokens, sdkRequest, type CountTokensInput, type MessagesInput } from './input.ts';
import { messageJson, messageStream } from './translate.ts';

export { anthropicError } from './errors.ts';
export { countTokensInput, messagesInput } from './input.ts';

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);

/** Anthropic usage → measured: its input_tokens leave out cache writes and reads. */
function measuredOf(u: any, acc: Partial<Measured> = {}): Partial<Measured> {
  if (!u || typeof u !== 'object') return acc;
  if (u.input_tokens != null || u.cache_read_input_tokens != null || u.cache_creation_input_tokens != null) {
    acc.cached_tokens = num(u.cache_read_input_tokens);
    acc.input_tokens = num(u.input_tokens) + num(u.cache_creation_input_tokens) + acc.cached_tokens;
  }
  if (u.output_tokens != null) acc.output_tokens = num(u.output_tokens);
  return acc;
}

/** Betas the client asked for travel to a native upstream (the body may use them). */
function betaHeader(req: Request): Record<string, string> {
  const b = req.headers.get('anthropic-beta');
  return b ? { 'anthropic-beta': b } : {};
}

export async function messages(ctx: ActionContext<MessagesInput>): Promise<Response> {
  const { input, gateway: gw } = ctx;
  const r = resolveModel(gw, ctx.identity, input.model, 'messages');
  const url = r.adapter.nativeUrl?.(r.provider, 'messages') ?? null;
  const raw = await ctx.rawBody();
  const q = url ? null : sdkRequest(input); // a request that cannot be translated is a 400 before any hold
  const call = AiCall.start(gw, ctx.identity, r.model, 'messages', ctx.requestId);
  // Claude Code asks for up to 32000 tokens: another model gets at most what it can write.
  const maxOut = url ? input.max_tokens : Math.min(input.max_tokens, r.model.maxOutputTokens ?? input.max_tokens);
  if (q) q.maxOutputTokens = maxOut;
  await call.reserve({ input_tokens: raw.byteLength, output_tokens: maxOut });
  const stream = input.stream === true;

  if (url) {
    return forward(ctx as ActionContext<unknown>, r, call, {
      url,
      body: upstreamBody(input, raw, r.model.upstream),
      stream,
      headers: betaHeader(ctx.request),
      inputBytes: raw.byteLength,
      usageOfJson: (j) => measuredOf(j?.usage),
      usageEvents: {
        message_start: (d, acc) => void measuredOf(d?.message?.usage, acc),
        message_delta: (d, acc) => void measuredOf(d?.usage, acc),
      },
      finalEvents: ['message_delta'],
      errorEvent: anthropicErrorEvent,
    });
  }

  const id = `msg_${ctx.requestId}`;
  if (stream) return sdkStream(ctx as ActionContext<unknown>, r, call, q!, raw.byteLength, messageStream(id, input.model));
  const { res, used } = await sdkGenerate(ctx as ActionContext<unknown>, r, call, q!, raw.byteLength);
  return Response.json(messageJson(id, input.model, res, used));
}

/** Free, like Anthropic's: native upstreams count exactly, the others get an estimate. */
export async function countTokens(ctx: ActionContext<CountTokensInput>): Promise<Response> {
  const { input, gateway: gw } = ctx;
  const r = resolveModel(gw, ctx.identity, input.model, 'messages');
  const url = r.adapter.nativeUrl?.(r.provider, 'messages/count_tokens') ?? null;
  if (!url) return Response.json({ input_tokens: estimateTokens(input) });
  const raw = await ctx.rawBody();
  const d = deadline(ctx.signal, upstreamTimeoutMs(gw));
  const t0 = performance.now();
  try {
    const res = await gw.http.request({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', ...betaHeader(ctx.request), ...r.adapter.authHeaders(r.provider) },
      body: upstreamBody(input, raw, r.model.upstream),
      signal: d.signal,
    });
    const text = await res.text();
    if (res.status >= 400) throw fromUpstreamStatus(res.status, text);
    return new Response(text, { headers: { 'content-type': 'application/json' } });
  } catch (e) {
    throw e instanceof GatewayError ? e : toGatewayError(e, d);
  } finally {
    ctx.timing.upstreamMs += performance.now() - t0;
    d.clear();
  }
}
