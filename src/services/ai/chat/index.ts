// POST /v1/ai/chat/completions: byte pass-through to OpenAI-compatible upstreams, AI SDK
// translation for the others.
import type { ActionContext } from '../../../kernel/service.ts';
import { resolveModel } from '../resolve.ts';
import type { ChatInput } from './input.ts';
import { passthrough } from './passthrough.ts';
import { translate } from './translate.ts';

export { chatInput } from './input.ts';

export async function chatCompletions(ctx: ActionContext<ChatInput>): Promise<Response> {
  const r = resolveModel(ctx.gateway, ctx.identity, ctx.input.model, 'compat');
  const url = r.adapter.chatCompletionsUrl(r.provider);
  return url ? passthrough(ctx, r, url) : translate(ctx, r);
}
