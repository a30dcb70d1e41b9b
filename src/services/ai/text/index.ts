// POST /v1/ai/text (one assistant message) and POST /v1/ai/stream (the AI SDK's UI message
// stream, consumed unchanged by DefaultChatTransport / useChat and readUIMessageStream).
import { streamingResponse } from '../../../kernel/http.ts';
import type { ModelMessage, UIMessage } from 'ai';
import { z } from 'zod';
import { newId } from '../../../kernel/crypto.ts';
import { badRequest } from '../../../kernel/errors.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { sdkUsage, toModelMessages, usageReported } from '../chat/translate.ts';
import { AiCall, byteLength, estimateFromText, tokenBound } from '../meter.ts';
import { maxOutputOf } from '../catalog/registry.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { routeCall, type Target } from '../routing/route.ts';
import { loadAi, type Ai } from '../upstream/sdk.ts';
import { downloadFor } from '../upstream/download.ts';
import { CLIENT_CLOSED, toGatewayError, type Deadline } from '../upstream/errors.ts';

export const textInput = z
  .object({
    city_id: z.string().optional(),
    model: z.string().min(1).max(256),
    prompt: z.string().min(1).max(1_000_000).optional(),
    messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant', 'tool', 'developer']) }).loose()).min(1).optional(),
    system: z.string().max(200_000).optional(),
    max_tokens: z.number().int().positive().max(1_000_000).optional(),
    temperature: z.number().min(0).max(2).optional(),
  })
  .loose()
  .refine((v) => (v.prompt === undefined) !== (v.messages === undefined), { message: 'give either prompt or messages', path: ['prompt'] });

export type TextInput = z.output<typeof textInput>;

const FINISH: Record<string, string> = { 'tool-calls': 'tool_calls', 'content-filter': 'content_filter' };

/** Messages as UI messages (with `parts`) or as Chat Completions messages (with `content`). */
async function modelMessages({ validateUIMessages, convertToModelMessages }: Ai, input: TextInput): Promise<{ messages: ModelMessage[]; ui: UIMessage[] | null }> {
  if (input.messages === undefined) return { messages: [{ role: 'user', content: input.prompt! }], ui: null };
  const isUi = input.messages.every((m) => Array.isArray((m as { parts?: unknown }).parts));
  if (!isUi) return { messages: toModelMessages(input.messages), ui: null };
  let ui: UIMessage[];
  try {
    ui = await validateUIMessages({ messages: input.messages.map((m, i) => ({ id: `m${i}`, ...m })) });
  } catch (e) {
    throw badRequest('invalid_input', `messages: not valid UI messages (${(e as Error).message.slice(0, 300)})`, 'messages');
  }
  return { messages: await convertToModelMessages(ui), ui };
}

async function prepare(ctx: ActionContext<TextInput>, mode: 'text' | 'stream') {
  const { input, gateway: gw } = ctx;
  const r = await resolveModel(gw, ctx.identity, input.model, mode);
  const call = AiCall.start(gw, ctx.identity, r, mode, ctx.requestId, ctx.timing);
  const inputBound = tokenBound(JSON.stringify([input.system ?? '', input.prompt ?? '', input.messages ?? []]));
  const maxOut = maxOutputOf(r.model, input.max_tokens);
  return { r, call, inputBound, maxOut };
}

/** The AI SDK call both actions make: retries are citygate's business (routing), not the SDK's. */
async function callSettings(call: AiCall, input: TextInput, t: Target, messages: ModelMessages, abortSignal: AbortSignal) {
  return {
    model: await t.adapter.languageModel(t.call, t.upstreamModel),
    experimental_download: downloadFor(call, call.gw), // never the SDK's own download
    instructions: input.system,
    messages,
    allowSystemInMessages: true,
    maxOutputTokens: input.max_tokens,
    temperature: input.temperature,
    maxRetries: 0,
    abortSignal,
  };
}

const usageOut = (u: ReturnType<typeof sdkUsage>) => ({ input_tokens: u.input_tokens, output_tokens: u.output_tokens, cached_tokens: u.cached_tokens, total_tokens: u.input_tokens + u.output_tokens });

type ModelMessages = Awaited<ReturnType<typeof modelMessages>>['messages'];

/** Routing around one call; a failure ends the call's meter record. */
async function routed<T>(ctx: ActionContext<TextInput>, p: Awaited<ReturnType<typeof prepare>>, attempt: (t: Target, d: Deadline) => Promise<T>): Promise<T> {
  return routeCall(ctx, p.call, { model: p.r.model, operation: 'chat' }, attempt);
}

export async function text(ctx: ActionContext<TextInput>) {
  const { input } = ctx;
  const p = await prepare(ctx, 'text');
  const ai = await loadAi();
  const { messages } = await modelMessages(ai, input);
  await p.call.reserve({ input_tokens: p.inputBound, output_tokens: p.maxOut });
  const res = await routed(ctx, p, async (t, d) => {
    const out = await ai.generateText(await callSettings(p.call, input, t, messages, d.signal));
    d.clear();
    return out;
  });
  const u = sdkUsage(res.totalUsage ?? res.usage);
  const reqBytes = (await ctx.rawBody()).byteLength;
  await p.call.finish('ok', usageReported(res.totalUsage ?? res.usage) ? u : estimateFromText(reqBytes, byteLength(res.text)));
  return {
    id: newId('msg', 12),
    role: 'assistant' as const,
    parts: [{ type: 'text' as const, text: res.text }],
    metadata: { model: input.model, usage: usageOut(u), finish_reason: FINISH[res.finishReason] ?? res.finishReason },
  };
}

export async function stream(ctx: ActionContext<TextInput>): Promise<Response> {
  const { input, gateway: gw } = ctx;
  const p = await prepare(ctx, 'stream');
  const ai = await loadAi();
  const { messages, ui } = await modelMessages(ai, input);
  await p.call.reserve({ input_tokens: p.inputBound, output_tokens: p.maxOut });
  let usage = sdkUsage(undefined);
  let reported = false;
  let outBytes = 0; // text relayed: the estimate's basis when no usage is reported
  const reqBytes = (await ctx.rawBody()).byteLength;
  let failure: unknown = null;
  const countText = (c: unknown) => {
    const x = c as { type: string; delta?: unknown };
    if (x.type === 'text-delta' && typeof x.delta === 'string') outBytes += byteLength(x.delta);
  };
  // One attempt: read up to the first real chunk, so a failing upstream is retried (or gets its
  // status code) instead of a 200 stream that carries an error.
  const { reader, head, d } = await routed(ctx, p, async (t, d) => {
    failure = null;
    const result = ai.streamText(await callSettings(p.call, input, t, messages, d.signal));
    const uiStream = result.toUIMessageStream({
      originalMessages: ui ?? undefined,
      generateMessageId: () => newId('msg', 12),
      messageMetadata: ({ part }) => {
        if (part.type === 'start') return { model: input.model };
        if (part.type === 'finish') {
          usage = sdkUsage(part.totalUsage);
          reported = usageReported(part.totalUsage);
          return { model: input.model, usage: usageOut(usage), finish_reason: FINISH[part.finishReason] ?? part.finishReason };
        }
        return undefined;
      },
      onError: (e) => {
        failure = e;
        try {
          return toGatewayError(e, d).message;
        } catch {
          return 'The upstream stream broke off.';
        }
      },
    });
    const reader = uiStream.getReader();
    const head: unknown[] = [];
    for (;;) {
      const n = await reader.read();
      if (n.done) break;
      head.push(n.value);
      countText(n.value);
      const type = (n.value as { type: string }).type;
      if (type === 'error' && failure) {
        reader.cancel().catch(() => {});
        throw failure;
      }
      if (type !== 'start' && type !== 'start-step') break;
    }
    d.stopTimer();
    return { reader, head, d };
  });
  let settled = false;
  const end = (aborted: boolean) => {
    if (settled) return;
    settled = true;
    d.clear();
    const status = aborted || ctx.signal.aborted ? 'aborted' : failure ? 'error' : 'ok';
    gw.waitUntil(p.call.finish(status, reported ? usage : estimateFromText(reqBytes, outBytes), status === 'aborted' ? CLIENT_CLOSED : failure ? (d.expired ? toGatewayError(failure, d).code : 'upstream_stream_failed') : undefined));
  };
  const body = new ReadableStream<any>({
    start(controller) {
      for (const c of head) controller.enqueue(c);
    },
    async pull(controller) {
      try {
        const n = await reader.read();
        if (n.done) {
          controller.close();
          end(false);
        } else if ((n.value as { type: string }).type === 'abort' && d.expired) {
          // the AI SDK ends an aborted stream quietly: our own deadline's end is an error
          failure ??= d.reason;
          controller.enqueue({ type: 'error', errorText: toGatewayError(d.reason, d).message });
        } else {
          d.touch(); // the SDK's fetch is not ours: a part is the idle deadline's sign of life
          countText(n.value);
          controller.enqueue(n.value);
        }
      } catch (e) {
        failure ??= e;
        controller.close();
        end(false);
      }
    },
    async cancel() {
      d.abort();
      end(true);
      await reader.cancel().catch(() => {});
    },
  });
  // the runtime's own event-stream writer takes it (kernel/http.ts streamingResponse)
  const res = ai.createUIMessageStreamResponse({ stream: body });
  return streamingResponse(res.body!, { status: res.status, headers: res.headers });
}
