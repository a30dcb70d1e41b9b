// POST /v1/ai/responses/compact (the `openai` client's responses.compact()): a conversation in,
// its compacted form out — the user messages kept, then one compaction item. Forwarded as is to
// OpenAI upstreams ({base}/responses/compact); elsewhere the routed model writes the summary
// (compaction.ts) and citygate answers in the same shape. Charged and recorded as a call.
import { z } from 'zod';
import type { ActionContext } from '../../../kernel/service.ts';
import { forwardAttempt } from '../upstream/forward.ts';
import { AiCall } from '../meter.ts';
import { maxOutputOf } from '../catalog/registry.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { nativeUrlOf, routeCall, type Responder } from '../routing/route.ts';
import { sdkGenerate, servingPlan } from '../upstream/sdk-call.ts';
import { hostedToolsRejected } from '../upstream/hosted-tools.ts';
import { responsesInput, type ResponsesInput } from './input.ts';
import { compactedJson, type Meta } from './translate.ts';
import { compactionItem, holdsCitygateCompaction, keptUserMessages, openCompactions } from './compaction.ts';
import { compactionRequest, forwardedBody, measuredOf } from './index.ts';

export const compactInput = responsesInput.extend({
  stream: z.literal(false, { error: 'responses/compact answers JSON only' }).nullish(),
});

export async function compact(ctx: ActionContext<ResponsesInput>): Promise<Response> {
  const { gateway: gw } = ctx;
  const input = holdsCitygateCompaction(ctx.input) ? await openCompactions(gw, ctx.input) : ctx.input;
  const r = await resolveModel(gw, ctx.identity, input.model, 'responses');
  const raw = await ctx.rawBody();
  const plan = await servingPlan(gw, r.model, 'responses', (ai) => compactionRequest(ai, input, hostedToolsRejected(gw.env)));
  const call = AiCall.start(gw, ctx.identity, r, 'responses', ctx.requestId, ctx.timing);
  call.note = 'compaction';
  await call.reserve({ input_tokens: raw.byteLength, output_tokens: maxOutputOf(r.model, input.max_output_tokens) });
  const meta: Meta = { id: `resp_${ctx.requestId}`, model: input.model, createdAt: Math.floor(Date.now() / 1000), input, names: null };

  const respond = await routeCall(ctx, call, { model: r.model, operation: 'chat', serves: plan.serves, candidates: r.candidates }, (t, d): Promise<Responder> => {
    const url = nativeUrlOf(t.upstream, 'responses');
    if (url) {
      return forwardAttempt(ctx as ActionContext<unknown>, call, t, d, {
        url: `${url}/compact`,
        body: forwardedBody(ctx.input, input, raw, t.upstreamModel, {}),
        stream: false,
        inputBytes: raw.byteLength,
        usageOfJson: (j) => measuredOf(j?.usage),
        errorEvent: () => '',
      });
    }
    const kept = keptUserMessages(ctx.input);
    return sdkGenerate(call, plan.q!, raw.byteLength, t, d, async (res, used) => compactedJson(meta, kept, await compactionItem(gw, `cmp_${ctx.requestId}`, res.text), used), (b) => Response.json(b));
  });
  return respond();
}
