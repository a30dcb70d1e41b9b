// The Messages API request as citygate checks it, and its translation to an AI SDK call for
// upstreams that do not speak it. Only what citygate needs to route, bill and translate is
// validated; a native upstream gets everything else as sent.
import type { ModelMessage, ToolSet } from 'ai';
import { z } from 'zod';
import { badRequest } from '../../../kernel/errors.ts';
import type { SdkRequest } from '../sdk-call.ts';
import type { Ai } from '../sdk.ts';

const block = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(block)]);

export const messagesInput = z
  .object({
    model: z.string().min(1).max(256),
    max_tokens: z.number().int().positive(),
    messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content }).loose()).min(1),
    system: z.union([z.string(), z.array(block)]).optional(),
    stream: z.boolean().optional(),
    stop_sequences: z.array(z.string()).optional(),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().optional(),
    top_k: z.number().int().optional(),
    tools: z.array(z.object({ name: z.string().min(1) }).loose()).optional(),
    tool_choice: z.object({ type: z.enum(['auto', 'any', 'tool', 'none']), name: z.string().optional() }).loose().optional(),
    city_id: z.string().optional(),
  })
  .loose();
export type MessagesInput = z.output<typeof messagesInput>;

/** count_tokens takes the same request without max_tokens (and never streams). */
export const countTokensInput = messagesInput.omit({ max_tokens: true, stream: true });
export type CountTokensInput = z.output<typeof countTokensInput>;

type Block = { type: string; [k: string]: any };
const blocks = (c: string | Block[]): Block[] => (typeof c === 'string' ? [{ type: 'text', text: c }] : c);

function textOf(c: unknown): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.filter((b) => b?.type === 'text').map((b) => String(b.text ?? '')).join('\n');
  return '';
}

function imagePart(b: Block, at: string) {
  const s = b.source;
  if (s?.type === 'base64' && typeof s.data === 'string') return { type: 'image' as const, image: s.data, mediaType: String(s.media_type ?? 'image/png') };
  if (s?.type === 'url' && typeof s.url === 'string') {
    try {
      return { type: 'image' as const, image: new URL(s.url) };
    } catch {
      /* reported below */
    }
  }
  throw badRequest('invalid_input', `${at}.source: expected {type: "base64", media_type, data} or {type: "url", url}`, `${at}.source`);
}

function toolResultOutput(b: Block): any {
  const c = b.content;
  const isError = b.is_error === true;
  if (c === undefined || typeof c === 'string') return { type: isError ? 'error-text' : 'text', value: c ?? '' };
  const parts = (c as Block[]).map((x) =>
    x.type === 'image' && x.source?.type === 'base64'
      ? { type: 'file', data: { type: 'data', data: x.source.data }, mediaType: x.source.media_type }
      : { type: 'text', text: String(x.text ?? '') },
  );
  if (isError || parts.every((p) => p.type === 'text')) return { type: isError ? 'error-text' : 'text', value: parts.map((p: any) => p.text ?? '').join('\n') };
  return { type: 'content', value: parts };
}

/** Messages API messages (and system) → AI SDK model messages. */
export function toModelMessages(input: Pick<MessagesInput, 'system' | 'messages'>): ModelMessage[] {
  const out: ModelMessage[] = [];
  const system = textOf(input.system);
  if (system) out.push({ role: 'system', content: system });
  const toolNames = new Map<string, string>();
  input.messages.forEach((m, i) => {
    const bs = blocks(m.content as string | Block[]);
    if (m.role === 'assistant') {
      const parts: any[] = [];
      for (const b of bs) {
        if (b.type === 'text' && b.text) parts.push({ type: 'text', text: String(b.text) });
        else if (b.type === 'tool_use') {
          toolNames.set(String(b.id), String(b.name));
          parts.push({ type: 'tool-call', toolCallId: String(b.id), toolName: String(b.name), input: b.input ?? {} });
        }
        // thinking blocks belong to the model that wrote them: not replayed to another one
      }
      out.push({ role: 'assistant', content: parts });
      return;
    }
    const results: any[] = [];
    const parts: any[] = [];
    bs.forEach((b, j) => {
      const at = `messages.${i}.content.${j}`;
      if (b.type === 'text') parts.push({ type: 'text', text: String(b.text ?? '') });
      else if (b.type === 'image') parts.push(imagePart(b, at));
      else if (b.type === 'document' && b.source?.type === 'base64') parts.push({ type: 'file', data: b.source.data, mediaType: String(b.source.media_type ?? 'application/pdf') });
      else if (b.type === 'document' && b.source?.type === 'text') parts.push({ type: 'text', text: String(b.source.data ?? '') });
      else if (b.type === 'tool_result') {
        const id = String(b.tool_use_id ?? '');
        results.push({ type: 'tool-result', toolCallId: id, toolName: toolNames.get(id) ?? 'tool', output: toolResultOutput(b) });
      } else throw badRequest('invalid_input', `${at}.type: '${b.type}' blocks are not supported on this model's upstream`, `${at}.type`);
    });
    if (results.length) out.push({ role: 'tool', content: results });
    if (parts.length) out.push({ role: 'user', content: parts });
  });
  return out;
}

function toTools({ jsonSchema }: Ai, tools: MessagesInput['tools']): ToolSet | undefined {
  if (!tools?.length) return undefined;
  const set: ToolSet = {};
  tools.forEach((t: any, i) => {
    if (t.type !== undefined && t.type !== 'custom') {
      throw badRequest('invalid_input', `tools.${i}: the server tool '${t.type}' is only available on Anthropic upstreams`, `tools.${i}.type`);
    }
    set[t.name] = { description: t.description, inputSchema: jsonSchema(t.input_schema ?? { type: 'object', properties: {} }) } as ToolSet[string];
  });
  return set;
}

function toToolChoice(c: MessagesInput['tool_choice']): any {
  if (!c) return undefined;
  if (c.type === 'any') return 'required';
  if (c.type === 'tool') {
    if (!c.name) throw badRequest('invalid_input', 'tool_choice.name: required when type is "tool"', 'tool_choice.name');
    return { type: 'tool', toolName: c.name };
  }
  return c.type;
}

/** The AI SDK call for a Messages request (`ai`: the loaded SDK, whose jsonSchema wraps the tools' schemas). */
export function sdkRequest(ai: Ai, input: MessagesInput): SdkRequest {
  return {
    messages: toModelMessages(input),
    tools: toTools(ai, input.tools),
    toolChoice: toToolChoice(input.tool_choice),
    maxOutputTokens: input.max_tokens,
    temperature: input.temperature,
    topP: input.top_p,
    topK: input.top_k,
    stopSequences: input.stop_sequences,
  };
}

/** An estimate of the input tokens (no tokenizer): ~4 characters a token, images ~1,600. */
export function estimateTokens(input: Pick<MessagesInput, 'system' | 'messages' | 'tools'>): number {
  let chars = textOf(input.system).length;
  let images = 0;
  for (const m of input.messages) {
    for (const b of blocks(m.content as string | Block[])) {
      if (b.type === 'text') chars += String(b.text ?? '').length;
      else if (b.type === 'image' || b.type === 'document') images++;
      else if (b.type === 'tool_use') chars += JSON.stringify(b.input ?? {}).length;
      else if (b.type === 'tool_result') chars += typeof b.content === 'string' ? b.content.length : textOf(b.content).length;
    }
  }
  if (input.tools?.length) chars += JSON.stringify(input.tools).length;
  return Math.ceil(chars / 4) + 1600 * images;
}
