// chat/completions for upstreams that do not speak it (Anthropic, Google, or an
// openai-compatible slot with passthrough: false): the request is translated to an AI SDK
// call and the result back to Chat Completions JSON or SSE.
import { streamingResponse } from '../../../kernel/http.ts';
import type { LanguageModelUsage, ModelMessage, ToolSet } from 'ai';
import { badRequest, GatewayError } from '../../../kernel/errors.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { byteLength, estimateFromText, type AiCall } from '../meter.ts';
import type { Target } from '../routing/route.ts';
import { loadAi, type Ai } from '../upstream/sdk.ts';
import { downloadFor } from '../upstream/download.ts';
import { CLIENT_CLOSED, toGatewayError, type Deadline } from '../upstream/errors.ts';
import type { ChatInput } from './input.ts';

/**
 * What an AI SDK usage is charged by: input (cache reads and writes included), cache reads
 * (OpenAI cached_tokens, Google cached content, Anthropic cache_read_input_tokens, DeepSeek's
 * prompt_cache_hit_tokens), cache writes (Anthropic cache_creation_input_tokens, with the
 * 1-hour cache's share from its raw usage), output.
 */
export function sdkUsage(u: LanguageModelUsage | undefined) {
  const raw = u?.raw as Record<string, any> | undefined;
  return {
    input_tokens: u?.inputTokens ?? 0,
    output_tokens: u?.outputTokens ?? 0,
    cached_tokens: u?.inputTokenDetails?.cacheReadTokens ?? count(raw?.prompt_cache_hit_tokens),
    cache_write_tokens: u?.inputTokenDetails?.cacheWriteTokens ?? 0,
    cache_write_1h_tokens: count(raw?.cache_creation?.ephemeral_1h_input_tokens),
  };
}
const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);

/** Whether the upstream reported any usage (an OpenAI-compatible server may not: then citygate estimates). */
/**
 * Reads an AI SDK full stream up to its first real part (past 'start' / 'start-step'), so that a
 * failing upstream throws here (retried, or answered with its status) instead of inside a 200
 * stream. Returns the parts read, to be relayed first.
 */
export async function headParts(it: AsyncIterator<any>): Promise<any[]> {
  const head: any[] = [];
  for (;;) {
    const n = await it.next();
    if (n.done) break;
    if (n.value.type === 'error') throw n.value.error;
    head.push(n.value);
    if (n.value.type !== 'start' && n.value.type !== 'start-step') break;
  }
  return head;
}

/**
 * The SDK stream's parts: the head already read (headParts), then the rest as they come, each
 * touching the idle deadline (the SDK's fetch is not ours: a part is the stream's sign of life).
 */
export async function* touchedParts(head: any[], it: AsyncIterator<any>, d: { touch(): void }): AsyncGenerator<any> {
  yield* head;
  for (;;) {
    const n = await it.next();
    if (n.done) return;
    d.touch();
    yield n.value;
  }
}

export const usageReported = (u: LanguageModelUsage | undefined) => u?.inputTokens !== undefined || u?.outputTokens !== undefined;

const FINISH: Record<string, string> = { stop: 'stop', length: 'length', 'content-filter': 'content_filter', 'tool-calls': 'tool_calls' };

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p === 'object' && typeof p.text === 'string' ? p.text : '')).join('');
  return '';
}

/** Chat Completions messages → AI SDK model messages. */
export function toModelMessages(messages: any[]): ModelMessage[] {
  const toolNames = new Map<string, string>();
  const out: ModelMessage[] = [];
  messages.forEach((m, i) => {
    const role = m.role;
    if (role === 'system' || role === 'developer') out.push({ role: 'system', content: textOf(m.content) });
    else if (role === 'user') {
      if (typeof m.content === 'string') out.push({ role: 'user', content: m.content });
      else if (Array.isArray(m.content)) {
        out.push({
          role: 'user',
          content: m.content.map((p: any) => {
            if (p?.type === 'image_url') return { type: 'image' as const, image: new URL(String(p.image_url?.url ?? p.image_url)) };
            return { type: 'text' as const, text: String(p?.text ?? '') };
          }),
        });
      } else throw badRequest('invalid_input', `messages.${i}.content: expected a string or an array of parts`, `messages.${i}.content`);
    } else if (role === 'assistant') {
      const parts: any[] = [];
      const text = textOf(m.content);
      if (text) parts.push({ type: 'text', text });
      for (const tc of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
        let input: unknown = {};
        try {
          input = JSON.parse(tc?.function?.arguments || '{}');
        } catch {
          throw badRequest('invalid_input', `messages.${i}.tool_calls: arguments must be JSON`, `messages.${i}.tool_calls`);
        }
        toolNames.set(tc.id, tc.function?.name);
        parts.push({ type: 'tool-call', toolCallId: String(tc.id), toolName: String(tc.function?.name), input });
      }
      out.push({ role: 'assistant', content: parts });
    } else if (role === 'tool') {
      const id = String(m.tool_call_id ?? '');
      out.push({
        role: 'tool',
        content: [{ type: 'tool-result', toolCallId: id, toolName: toolNames.get(id) ?? m.name ?? 'tool', output: { type: 'text', value: textOf(m.content) } }],
      });
    } else throw badRequest('invalid_input', `messages.${i}.role: unknown role '${role}'`, `messages.${i}.role`);
  });
  return out;
}

function toTools({ jsonSchema }: Ai, tools: unknown): ToolSet | undefined {
  if (!Array.isArray(tools) || tools.length === 0) return undefined;
  const set: ToolSet = {};
  for (const t of tools) {
    const f = t?.function;
    if (t?.type !== 'function' || typeof f?.name !== 'string') throw badRequest('invalid_input', 'tools: each tool must be {type: "function", function: {name, parameters}}', 'tools');
    set[f.name] = { description: f.description, inputSchema: jsonSchema(f.parameters ?? { type: 'object', properties: {} }) } as ToolSet[string];
  }
  return set;
}

function toToolChoice(c: unknown): any {
  if (c === undefined || c === null) return undefined;
  if (c === 'auto' || c === 'none' || c === 'required') return c;
  if (typeof c === 'object' && (c as any).function?.name) return { type: 'tool', toolName: (c as any).function.name };
  throw badRequest('invalid_input', 'tool_choice: expected "auto", "none", "required" or a function', 'tool_choice');
}

function toOutput({ jsonSchema, Output }: Ai, rf: any): any {
  if (!rf || rf.type === 'text') return undefined;
  if (rf.type === 'json_object') return Output.json();
  if (rf.type === 'json_schema' && rf.json_schema?.schema) return Output.object({ schema: jsonSchema(rf.json_schema.schema), name: rf.json_schema.name });
  throw badRequest('invalid_input', 'response_format: expected text, json_object or json_schema', 'response_format');
}

function sdkOptions(ai: Ai, input: ChatInput) {
  const i = input as any;
  const stop = typeof i.stop === 'string' ? [i.stop] : Array.isArray(i.stop) ? i.stop : undefined;
  return {
    messages: toModelMessages(input.messages),
    allowSystemInMessages: true,
    tools: toTools(ai, i.tools),
    toolChoice: toToolChoice(i.tool_choice),
    output: toOutput(ai, i.response_format),
    maxOutputTokens: input.max_completion_tokens ?? input.max_tokens ?? undefined,
    temperature: typeof i.temperature === 'number' ? i.temperature : undefined,
    topP: typeof i.top_p === 'number' ? i.top_p : undefined,
    stopSequences: stop,
    seed: typeof i.seed === 'number' ? i.seed : undefined,
    maxRetries: 0,
  };
}

const usageJson = (u: ReturnType<typeof sdkUsage>) => ({
  prompt_tokens: u.input_tokens,
  completion_tokens: u.output_tokens,
  total_tokens: u.input_tokens + u.output_tokens,
  prompt_tokens_details: { cached_tokens: u.cached_tokens, ...(u.cache_write_tokens ? { cache_write_tokens: u.cache_write_tokens } : {}) },
});

/** One attempt (see routing/route.ts): returns once the answer, or a stream's first part, is in hand. */
export async function translateAttempt(ctx: ActionContext<ChatInput>, call: AiCall, raw: Uint8Array, t: Target, d: Deadline): Promise<() => Response | Promise<Response>> {
  const { input } = ctx;
  const ai = await loadAi();
  const opts = sdkOptions(ai, input);
  const model = await t.adapter.languageModel(t.call, t.upstreamModel);
  const id = `chatcmpl-${ctx.requestId}`;
  const created = Math.floor(Date.now() / 1000);

  if (input.stream !== true) {
    const res = await ai.generateText({ model, ...opts, experimental_download: downloadFor(call, call.gw), abortSignal: d.signal });
    d.clear();
    const u = sdkUsage(res.totalUsage ?? res.usage);
    const toolCalls = res.toolCalls.map((tc: any) => ({ id: tc.toolCallId, type: 'function', function: { name: tc.toolName, arguments: JSON.stringify(tc.input) } }));
    const outBytes = byteLength(res.text) + toolCalls.reduce((n, tc) => n + byteLength(tc.function.arguments), 0);
    const reported = usageReported(res.totalUsage ?? res.usage);
    const used = reported ? u : estimateFromText(raw.byteLength, outBytes);
    return async () => {
      // finished here, once routing is done, so the record's overhead is the response's
      await call.finish('ok', used);
      return Response.json({
        id,
        object: 'chat.completion',
        created,
        model: input.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: res.text || (toolCalls.length ? null : ''), ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
            finish_reason: FINISH[res.finishReason] ?? 'stop',
          },
        ],
        // none reported: none shown (as a relayed answer would), not zeros; the charge is the estimate
        ...(reported ? { usage: usageJson(u) } : {}),
      });
    };
  }

  const wantsUsage = input.stream_options?.include_usage === true;
  const enc = new TextEncoder();
  const chunk = (delta: object, finish: string | null = null, extra: object = {}) =>
    enc.encode(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: input.model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`);
  const result = ai.streamText({ model, ...opts, experimental_download: downloadFor(call, call.gw), abortSignal: d.signal });
  const it = (result.fullStream as AsyncIterable<any>)[Symbol.asyncIterator]();
  // Wait for the upstream's first real part so that a failing upstream is retried, or gets its
  // status code (502, 504, 400), instead of a 200 stream that carries an error.
  const head = await headParts(it);
  d.stopTimer();
  let tools = 0;
  let usage = sdkUsage(undefined);
  let reported = false;
  let outBytes = 0; // text relayed: the estimate's basis when no usage is reported
  const used = () => (reported ? usage : estimateFromText(raw.byteLength, outBytes));
  let finish = 'stop';
  const parts = () => touchedParts(head, it, d);
  return () => {
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        try {
          controller.enqueue(chunk({ role: 'assistant', content: '' }));
          for await (const p of parts()) {
            if (p.type === 'text-delta' && p.text) {
              outBytes += byteLength(p.text);
              controller.enqueue(chunk({ content: p.text }));
            } else if (p.type === 'tool-call') {
              outBytes += byteLength(JSON.stringify(p.input));
              controller.enqueue(chunk({ tool_calls: [{ index: tools++, id: p.toolCallId, type: 'function', function: { name: p.toolName, arguments: JSON.stringify(p.input) } }] }));
            } else if (p.type === 'finish') {
              usage = sdkUsage(p.totalUsage);
              reported = usageReported(p.totalUsage);
              finish = FINISH[p.finishReason] ?? 'stop';
            } else if (p.type === 'error') throw p.error;
            // the AI SDK ends an aborted stream quietly: our own deadline's end is an error
            else if (p.type === 'abort' && d.expired) throw d.reason;
          }
          controller.enqueue(chunk({}, finish));
          if (wantsUsage && reported) controller.enqueue(enc.encode(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: input.model, choices: [], usage: usageJson(usage) })}\n\n`));
          controller.enqueue(enc.encode('data: [DONE]\n\n'));
          controller.close();
          await call.finish('ok', used());
        } catch (e) {
          let failed: GatewayError;
          try {
            failed = toGatewayError(e, d);
          } catch {
            failed = new GatewayError(502, 'upstream_stream_failed', 'The upstream stream broke off.');
          }
          await call.finish(failed.code === CLIENT_CLOSED ? 'aborted' : 'error', used(), failed.code);
          try {
            controller.enqueue(enc.encode(`data: ${JSON.stringify(failed.toJSON())}\n\n`));
            controller.close();
          } catch {
            /* the client is gone */
          }
        } finally {
          d.clear();
        }
      },
    });
    return streamingResponse(body, { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } });
  };
}
