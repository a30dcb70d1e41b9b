// POST /v1/ai/responses: the OpenAI Responses API, stateless. Routed like chat/completions
// (retries, fallbacks, circuit breakers): each attempt forwards to an upstream that speaks it
// (OpenAI) or translates through the AI SDK onto chat/completions (or the provider's own API).
import type { Measured } from '../../../kernel/metering.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { forwardAttempt, upstreamBody } from '../upstream/forward.ts';
import { AiCall } from '../meter.ts';
import { maxOutputOf } from '../catalog/registry.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { nativeUrlOf, routeCall, type Responder } from '../routing/route.ts';
import { sdkGenerate, sdkStream, servingPlan } from '../upstream/sdk-call.ts';
import { hostedToolsRejected } from '../upstream/hosted-tools.ts';
import { declaredToolsOf, sdkRequest, type ResponsesInput } from './input.ts';
import { responseJson, responseStream } from './translate.ts';

export { responsesInput } from './input.ts';

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);
const measuredOf = (u: any): Partial<Measured> =>
  u ? { input_tokens: num(u.input_tokens), output_tokens: num(u.output_tokens), cached_tokens: num(u.input_tokens_details?.cached_tokens) } : {};

export async function responses(ctx: ActionContext<ResponsesInput>): Promise<Response> {
  const { input, gateway: gw } = ctx;
  const r = await resolveModel(gw, ctx.identity, input.model, 'responses');
  const raw = await ctx.rawBody();
  const plan = await servingPlan(gw, r.model, 'responses', (ai) => sdkRequest(ai, input, hostedToolsRejected(gw.env))); // an untranslatable request is a 400 before any hold
  const call = AiCall.start(gw, ctx.identity, r, 'responses', ctx.requestId, ctx.timing);
  await call.reserve({ input_tokens: raw.byteLength, output_tokens: maxOutputOf(r.model, input.max_output_tokens) });
  const stream = input.stream === true;
  const meta = { id: `resp_${ctx.requestId}`, model: input.model, createdAt: Math.floor(Date.now() / 1000), input, names: plan.q ? declaredToolsOf(input.tools) : null };
  const fold = (d: any, acc: Partial<Measured>) => void Object.assign(acc, measuredOf(d?.response?.usage));

  const respond = await routeCall(ctx, call, { model: r.model, operation: 'chat', serves: plan.serves, candidates: r.candidates }, (t, d): Promise<Responder> => {
    const url = nativeUrlOf(t.upstream, 'responses');
    if (url) {
      return forwardAttempt(ctx as ActionContext<unknown>, call, t, d, {
        url,
        // stateless: the upstream keeps nothing either
        body: upstreamBody(input, raw, t.upstreamModel, input.store === false ? {} : { store: false }),
        stream,
        inputBytes: raw.byteLength,
        usageOfJson: (j) => measuredOf(j?.usage),
        usageEvents: { 'response.completed': fold, 'response.incomplete': fold, 'response.failed': fold },
        finalEvents: ['response.completed', 'response.incomplete', 'response.failed'],
        errorEvent: (e) => `event: error\ndata: ${JSON.stringify({ type: 'error', code: e.code, message: e.message, param: e.param ?? null })}\n\n`,
      });
    }
    if (stream) return sdkStream(ctx as ActionContext<unknown>, call, plan.q!, raw.byteLength, responseStream(meta), t, d);
    return sdkGenerate(call, plan.q!, raw.byteLength, t, d, (res, used) => responseJson(meta, res, used));
  });
  return respond();
}
