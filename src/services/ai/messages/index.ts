// POST /v1/ai/messages and /v1/ai/messages/count_tokens: the Anthropic Messages API (also at
// /v1/ai/v1/messages…, where the Anthropic SDK and Claude Code send it). Routed like
// chat/completions (retries, fallbacks, circuit breakers): each attempt forwards to an
// Anthropic upstream, or translates through the AI SDK onto any other.
import type { Measured } from '../../../kernel/metering.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { forwardAttempt, upstreamBody } from '../upstream/forward.ts';
import { AiCall } from '../meter.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { candidatesOf, nativeUrlOf, route, routeCall, type Responder } from '../routing/route.ts';
import type { Upstream } from '../routing/upstreams.ts';
import { sdkGenerate, sdkStream, servingPlan } from '../upstream/sdk-call.ts';
import { UpstreamStatusError } from '../upstream/errors.ts';
import { hostedToolsRejected } from '../upstream/hosted-tools.ts';
import { anthropicErrorEvent } from './errors.ts';
import { estimateTokens, sdkRequest, type CountTokensInput, type MessagesInput } from './input.ts';
import { messageJson, messageStream } from './translate.ts';

export { anthropicError } from './errors.ts';
export { countTokensInput, messagesInput } from './input.ts';

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);

/**
 * Anthropic usage → measured: its input_tokens leave out cache writes and reads, which
 * citygate counts in input_tokens and prices apart (cache_creation_input_tokens at the write
 * price, its cache_creation.ephemeral_1h_input_tokens share at the 1-hour write price).
 */
export function measuredOf(u: any, acc: Partial<Measured> = {}): Partial<Measured> {
  if (!u || typeof u !== 'object') return acc;
  if (u.input_tokens != null || u.cache_read_input_tokens != null || u.cache_creation_input_tokens != null) {
    // a later event (message_delta) restates the counts it carries; what it leaves out stands
    const plain = u.input_tokens != null ? num(u.input_tokens) : (acc.input_tokens ?? 0) - (acc.cached_tokens ?? 0) - (acc.cache_write_tokens ?? 0);
    if (u.cache_read_input_tokens != null) acc.cached_tokens = num(u.cache_read_input_tokens);
    if (u.cache_creation_input_tokens != null) acc.cache_write_tokens = num(u.cache_creation_input_tokens);
    if (u.cache_creation && typeof u.cache_creation === 'object') acc.cache_write_1h_tokens = num(u.cache_creation.ephemeral_1h_input_tokens);
    acc.cached_tokens ??= 0;
    acc.cache_write_tokens ??= 0;
    acc.cache_write_1h_tokens = Math.min(acc.cache_write_tokens, acc.cache_write_1h_tokens ?? 0);
    acc.input_tokens = Math.max(0, plain) + acc.cache_write_tokens + acc.cached_tokens;
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
  const r = await resolveModel(gw, ctx.identity, input.model, 'messages');
  const raw = await ctx.rawBody();
  const plan = await servingPlan(gw, r.model, 'messages', (ai) => sdkRequest(ai, input, hostedToolsRejected(gw.env))); // an untranslatable request is a 400 before any hold
  const call = AiCall.start(gw, ctx.identity, r, 'messages', ctx.requestId, ctx.timing);
  // Claude Code asks for up to 32000 tokens: a translated model gets at most what it can write.
  const translatedMax = Math.min(input.max_tokens, r.model.maxOutputTokens ?? input.max_tokens);
  if (plan.q) plan.q.maxOutputTokens = translatedMax;
  await call.reserve({ input_tokens: raw.byteLength, output_tokens: plan.anyNative ? input.max_tokens : translatedMax });
  const stream = input.stream === true;
  const id = `msg_${ctx.requestId}`;

  const respond = await routeCall(ctx, call, { model: r.model, operation: 'chat', serves: plan.serves, candidates: r.candidates }, (t, d): Promise<Responder> => {
    const url = nativeUrlOf(t.upstream, 'messages');
    if (url) {
      return forwardAttempt(ctx as ActionContext<unknown>, call, t, d, {
        url,
        body: upstreamBody(input, raw, t.upstreamModel),
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
    if (stream) return sdkStream(ctx as ActionContext<unknown>, call, plan.q!, raw.byteLength, messageStream(id, input.model), t, d);
    return sdkGenerate(call, plan.q!, raw.byteLength, t, d, (res, used) => messageJson(id, input.model, res, used));
  });
  return respond();
}

/** Free, like Anthropic's, and routed like the rest: native upstreams count exactly, else an estimate. */
export async function countTokens(ctx: ActionContext<CountTokensInput>): Promise<Response> {
  const { input, gateway: gw } = ctx;
  const r = await resolveModel(gw, ctx.identity, input.model, 'messages');
  const serves = (u: Upstream) => nativeUrlOf(u, 'messages/count_tokens') !== null;
  if (!candidatesOf(gw, r.model).some(serves)) return Response.json({ input_tokens: estimateTokens(input) });
  const raw = await ctx.rawBody();
  const text = await route(gw, { model: r.model, operation: 'count_tokens', signal: ctx.signal, timing: ctx.timing, serves }, async (t, d) => {
    const res = await gw.http.request({
      method: 'POST',
      url: nativeUrlOf(t.upstream, 'messages/count_tokens')!,
      headers: { 'content-type': 'application/json', ...betaHeader(ctx.request), ...t.adapter.authHeaders(t.provider) },
      body: upstreamBody(input, raw, t.upstreamModel),
      abort: d,
    });
    const body = await res.text();
    d.clear();
    if (res.status >= 400) throw new UpstreamStatusError(res.status, body, res.header('retry-after') ?? undefined);
    return body;
  });
  return new Response(text, { headers: { 'content-type': 'application/json' } });
}
