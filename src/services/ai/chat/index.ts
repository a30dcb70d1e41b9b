// POST /v1/ai/chat/completions: byte pass-through to OpenAI-compatible upstreams, AI SDK
// translation for the others. Routing picks the upstream per attempt, so one model may be
// served by both kinds.
import type { ActionContext } from '../../../kernel/service.ts';
import { AiCall } from '../meter.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { routeCall } from '../routing/route.ts';
import { reservationFor, type ChatInput } from './input.ts';
import { passthroughAttempt, passthroughUrl } from './passthrough.ts';
import { translateAttempt } from './translate.ts';

export { chatInput } from './input.ts';

export async function chatCompletions(ctx: ActionContext<ChatInput>): Promise<Response> {
  const { gateway: gw, input } = ctx;
  const r = await resolveModel(gw, ctx.identity, input.model, 'compat');
  const raw = await ctx.rawBody();
  const call = AiCall.start(gw, ctx.identity, r, 'compat', ctx.requestId, ctx.timing);
  await call.reserve(reservationFor(input, r.model, raw.byteLength));
  const respond = await routeCall(ctx, call, { model: r.model, operation: 'chat', candidates: r.candidates }, (t, d) => {
    const url = passthroughUrl(t);
    return url ? passthroughAttempt(ctx, call, raw, t, url, d) : translateAttempt(ctx, call, raw, t, d);
  });
  return respond();
}
