// POST /v1/ai/responses: the OpenAI Responses API, stateless. Forwarded to upstreams that
// speak it (the OpenAI slot), translated through the AI SDK onto chat/completions (or the
// provider's own API) for the others.
import type { Measured } from '../../../kernel/metering.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { forward, upstreamBody } from '../forward.ts';
import { AiCall } from '../meter.ts';
import { maxOutputOf } from '../registry.ts';
import { resolveModel } from '../resolve.ts';
import { sdkGenerate, sdkStream } from '../sdk-call.ts';
import { sdkRequest, type ResponsesInput } from './input.ts';
import { responseJson, responseStream } from './translate.ts';

export { responsesInput } from './input.ts';

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);
const measuredOf = (u: any): Partial<Measured> =>
  u ? { input_tokens: num(u.input_tokens), output_tokens: num(u.output_tokens), cached_tokens: num(u.input_tokens_details?.cached_tokens) } : {};

export async function responses(ctx: ActionContext<ResponsesInput>): Promise<Response> {
  const { input, gateway: gw } = ctx;
  const r = resolveModel(gw, ctx.identity, input.model, 'responses');
  const url = r.adapter.nativeUrl?.(r.provider, 'responses') ?? null;
  const raw = await ctx.rawBody();
  const q = url ? null : sdkRequest(input); // a request that cannot be translated is a 400 before any hold
  const call = AiCall.start(gw, ctx.identity, r.model, 'responses', ctx.requestId);
  await call.reserve({ input_tokens: raw.byteLength, output_tokens: maxOutputOf(r.model, input.max_output_tokens) });
  const stream = input.stream === true;

  if (url) {
    const fold = (d: any, acc: Partial<Measured>) => void Object.assign(acc, measuredOf(d?.response?.usage));
    return forward(ctx as ActionContext<unknown>, r, call, {
      url,
      // stateless: the upstream keeps nothing either
      body: upstreamBody(input, raw, r.model.upstream, input.store === false ? {} : { store: false }),
      stream,
      inputBytes: raw.byteLength,
      usageOfJson: (j) => measuredOf(j?.usage),
      usageEvents: { 'response.completed': fold, 'response.incomplete': fold, 'response.failed': fold },
      finalEvents: ['response.completed', 'response.incomplete', 'response.failed'],
      errorEvent: (e) => `event: error\ndata: ${JSON.stringify({ type: 'error', code: e.code, message: e.message, param: e.param ?? null })}\n\n`,
    });
  }

  const meta = { id: `resp_${ctx.requestId}`, model: input.model, createdAt: Math.floor(Date.now() / 1000), input };
  if (stream) return sdkStream(ctx as ActionContext<unknown>, r, call, q!, raw.byteLength, responseStream(meta));
  const { res, used } = await sdkGenerate(ctx as ActionContext<unknown>, r, call, q!, raw.byteLength);
  return Response.json(responseJson(meta, res, used));
}
