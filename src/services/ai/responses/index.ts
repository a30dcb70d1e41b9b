// POST /v1/ai/responses: the OpenAI Responses API, stateless. Routed like chat/completions
// (retries, fallbacks, circuit breakers): each attempt forwards to an upstream that speaks it
// (OpenAI) or translates through the AI SDK onto chat/completions (or the provider's own API).
// A compaction_trigger is OpenAI's on OpenAI, and the routed model's own summary elsewhere
// (compaction.ts); POST /v1/ai/responses/compact is compact.ts.
import type { Measured } from '../../../kernel/metering.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { forwardAttempt, upstreamBody } from '../upstream/forward.ts';
import { AiCall } from '../meter.ts';
import { maxOutputOf } from '../catalog/registry.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { nativeUrlOf, routeCall, type Responder } from '../routing/route.ts';
import { sdkGenerate, sdkStream, servingPlan, type SdkRequest } from '../upstream/sdk-call.ts';
import { hostedToolsRejected } from '../upstream/hosted-tools.ts';
import type { Ai } from '../upstream/sdk.ts';
import { declaredToolsOf, sdkRequest, type ResponsesInput } from './input.ts';
import { compactionEvents, compactionJson, responseJson, responseStream, warmUpEvents, warmUpJson, type Meta } from './translate.ts';
import { compactionItem, compactionTriggered, holdsCitygateCompaction, openCompactions, toCompact } from './compaction.ts';

export { responsesInput } from './input.ts';

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);
export const measuredOf = (u: any): Partial<Measured> =>
  u ? { input_tokens: num(u.input_tokens), output_tokens: num(u.output_tokens), cached_tokens: num(u.input_tokens_details?.cached_tokens) } : {};

/** The body forwarded to an OpenAI upstream: as sent, unless citygate rewrote the input (its compaction items opened). */
export function forwardedBody(sent: ResponsesInput, input: ResponsesInput, raw: Uint8Array, upstreamModel: string, extra: Record<string, unknown>) {
  if (input === sent) return upstreamBody(input, raw, upstreamModel, extra);
  const copy: Record<string, unknown> = { ...input, model: upstreamModel, ...extra };
  delete copy.city_id;
  return JSON.stringify(copy);
}

/** The AI SDK call that makes the routed model write a compaction summary: the conversation, then the prompt; tools declared but not called. */
export function compactionRequest(ai: Ai, input: ResponsesInput, strictHosted: boolean): SdkRequest {
  const q = sdkRequest(ai, { ...toCompact(input), text: undefined, tool_choice: undefined }, strictHosted);
  if (q.tools) q.toolChoice = 'none';
  return q;
}

export const sse = (text: string) => new Response(text, { headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } });

export async function responses(ctx: ActionContext<ResponsesInput>): Promise<Response> {
  const { gateway: gw } = ctx;
  if (ctx.input.generate === false) return warmUp(ctx);
  const input = holdsCitygateCompaction(ctx.input) ? await openCompactions(gw, ctx.input) : ctx.input;
  const compacting = compactionTriggered(input);
  const r = await resolveModel(gw, ctx.identity, input.model, 'responses');
  const raw = await ctx.rawBody();
  const strict = hostedToolsRejected(gw.env);
  // an untranslatable request is a 400 before any hold
  const plan = await servingPlan(gw, r.model, 'responses', (ai) => (compacting ? compactionRequest(ai, input, strict) : sdkRequest(ai, input, strict)));
  const call = AiCall.start(gw, ctx.identity, r, 'responses', ctx.requestId, ctx.timing);
  if (compacting) call.note = 'compaction';
  await call.reserve({ input_tokens: raw.byteLength, output_tokens: maxOutputOf(r.model, input.max_output_tokens) });
  const stream = input.stream === true;
  const meta: Meta = { id: `resp_${ctx.requestId}`, model: input.model, createdAt: Math.floor(Date.now() / 1000), input, names: plan.q && !compacting ? declaredToolsOf(input.tools) : null };
  const fold = (d: any, acc: Partial<Measured>) => void Object.assign(acc, measuredOf(d?.response?.usage));

  const respond = await routeCall(ctx, call, { model: r.model, operation: 'chat', serves: plan.serves, candidates: r.candidates }, (t, d): Promise<Responder> => {
    const url = nativeUrlOf(t.upstream, 'responses');
    if (url) {
      return forwardAttempt(ctx as ActionContext<unknown>, call, t, d, {
        url,
        // stateless: the upstream keeps nothing either
        body: forwardedBody(ctx.input, input, raw, t.upstreamModel, input.store === false ? {} : { store: false }),
        stream,
        inputBytes: raw.byteLength,
        usageOfJson: (j) => measuredOf(j?.usage),
        usageEvents: { 'response.completed': fold, 'response.incomplete': fold, 'response.failed': fold },
        finalEvents: ['response.completed', 'response.incomplete', 'response.failed'],
        errorEvent: (e) => `event: error\ndata: ${JSON.stringify({ type: 'error', code: e.code, message: e.message, param: e.param ?? null })}\n\n`,
      });
    }
    if (compacting) {
      // the summary is written whole (an item holds it sealed), then sent as JSON or as the item's events
      const id = `cmp_${ctx.requestId}`;
      return sdkGenerate(call, plan.q!, raw.byteLength, t, d, async (res, used) => ({ item: await compactionItem(gw, id, res.text), used }), (b) => {
        const { item, used } = b as { item: object; used: any };
        return stream ? sse(compactionEvents(meta, item, used)) : Response.json(compactionJson(meta, item, used));
      });
    }
    if (stream) return sdkStream(ctx as ActionContext<unknown>, call, plan.q!, raw.byteLength, responseStream(meta), t, d);
    return sdkGenerate(call, plan.q!, raw.byteLength, t, d, (res, used) => responseJson(meta, res, used));
  });
  return respond();
}

/**
 * `generate: false` (what Codex sends first on a WebSocket): nothing is generated and no model
 * is called; the request's state is what a later turn continues from (the socket keeps it,
 * websocket/turns.ts). The model is checked as for any call, and the turn is recorded, free.
 */
async function warmUp(ctx: ActionContext<ResponsesInput>): Promise<Response> {
  const { gateway: gw, input } = ctx;
  const r = await resolveModel(gw, ctx.identity, input.model, 'responses');
  const call = AiCall.start(gw, ctx.identity, r, 'responses', ctx.requestId, ctx.timing);
  call.note = 'warm-up (generate: false): no model call';
  await call.finish('ok', {});
  const meta: Meta = { id: `resp_${ctx.requestId}`, model: input.model, createdAt: Math.floor(Date.now() / 1000), input, names: null };
  return input.stream === true ? sse(warmUpEvents(meta)) : Response.json(warmUpJson(meta));
}
