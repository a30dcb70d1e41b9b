// POST /v1/ai/chat/completions: byte pass-through to OpenAI-compatible upstreams, AI SDK
// translation for the others. Routing picks the upstream per attempt, so one model may be
// served by both kinds.
import type { ActionContext } from '../../../kernel/service.ts';
import { AiCall } from '../meter.ts';
import { resolveModel } from '../resolve.ts';
import { route } from '../routing/route.ts';
import { CLIENT_CLOSED } from '../upstream-errors.ts';
import { reservationFor, type ChatInput } from './input.ts';
import { passthroughAttempt } from './passthrough.ts';
import { translateAttempt } from './translate.ts';

export { chatInput } from './input.ts';

export async function chatCompletions(ctx: ActionContext<ChatInput>): Promise<Response> {
  const { gateway: gw, input } = ctx;
  const r = await resolveModel(gw, ctx.identity, input.model, 'compat');
  const raw = await ctx.rawBody();
  const call = AiCall.start(gw, ctx.identity, r.model, 'compat', ctx.requestId, ctx.timing);
  await call.reserve(reservationFor(input, r.model, raw.byteLength));
  let respond: () => Response | Promise<Response>;
  try {
    respond = await route(gw, { model: r.model, operation: 'chat', signal: ctx.signal, timing: ctx.timing, observer: call }, (t, d) => {
      const url = t.adapter.chatCompletionsUrl(t.provider);
      return url ? passthroughAttempt(ctx, call, raw, t, url, d) : translateAttempt(ctx, call, raw, t, d);
    });
  } catch (e) {
    const code = (e as { code?: string }).code ?? 'internal_error';
    await call.finish(code === CLIENT_CLOSED ? 'aborted' : 'error', {}, code);
    throw e;
  }
  return respond();
}
