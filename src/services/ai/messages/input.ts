// The Messages API request as citygate checks it, and its translation to an AI SDK call for
// upstreams that do not speak it. Only what citygate itself needs (the model, max_tokens for
// the hold, stream, city_id) is validated up front: a native upstream gets everything else as
// sent, whatever fields, block types, roles or betas a current client uses. The translation
// checks what it reads and ignores what it cannot carry (thinking, cache_control, metadata,
// context_management, fields yet unknown); it refuses (400, naming the field) only where the
// request's meaning would be lost.
import type { ModelMessage, ToolSet } from 'ai';
import { z } from 'zod';
import { badRequest } from '../../../kernel/errors.ts';
import { validate } from '../../../kernel/input.ts';
import { HostedTools } from '../upstream/hosted-tools.ts';
import type { SdkRequest } from '../upstream/sdk-call.ts';
import type { Ai } from '../upstream/sdk.ts';

const block = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(block)]);

export const messagesInput = z
  .object({
    model: z.string().min(1).max(256),
    max_tokens: z.number().int().positive(),
    messages: z.array(z.object({ role: z.string() }).loose()).min(1),
    stream: z.boolean().optional(),
    city_id: z.string().optional(),
  })
  .loose();
export type MessagesInput = z.output<typeof messagesInput> & Record<string, any>;

/** count_tokens takes the same request without max_tokens (and never streams). */
export const countTokensInput = messagesInput.omit({ max_tokens: true, stream: true });
export type CountTokensInput = z.output<typeof countTokensInput> & Record<string, any>;

/** What the translation reads, checked only when a request is translated. */
const translatedInput = z
  .object({
    // system turns inside messages: Claude Code sends them for model ids it does not know as Claude
    messages: z.array(z.object({ role: z.enum(['user', 'assistant', 'system']), content }).loose()),
    system: z.union([z.string(), z.array(block)]).optional(),
    stop_sequences: z.array(z.string()).optional(),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().optional(),
    top_k: z.number().int().optional(),
    tools: z.array(z.object({ name: z.string().min(1) }).loose()).optional(),
    tool_choice: z.object({ type: z.enum(['auto', 'any', 'tool', 'none']), name: z.string().optional() }).loose().optional(),
  })
  .loose();
type Translated = z.output<typeof translatedInput>;

type Block = { type: string; [k: string]: any };
const blocks = (c: unknown): Block[] => (typeof c === 'string' ? [{ type: 'text', text: c }] : Array.isArray(c) ? c : []);

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
export function toModelMessages(input: Pick<Translated, 'system' | 'messages'>): ModelMessage[] {
  const out: ModelMessage[] = [];
  const system = textOf(input.system);
  if (system) out.push({ role: 'system', content: system });
  const toolNames = new Map<string, string>();
  input.messages.forEach((m, i) => {
    const bs = blocks(m.content);
    if (m.role === 'system') {
      // where it stands: a system turn placed mid-conversation keeps its place
      const text = textOf(m.content);
      if (text) out.push({ role: 'system', content: text });
      return;
    }
    if (m.role === 'assistant') {
      const parts: any[] = [];
      for (const b of bs) {
        if (b.type === 'text' && b.text) parts.push({ type: 'text', text: String(b.text) });
        else if (b.type === 'tool_use') {
          toolNames.set(String(b.id), String(b.name));
          parts.push({ type: 'tool-call', toolCallId: String(b.id), toolName: String(b.name), input: b.input ?? {} });
        }
        // thinking, redacted_thinking and server-tool blocks belong to the model that wrote
        // them: not replayed to another one
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

function toTools({ jsonSchema }: Ai, tools: Translated['tools'], hosted: HostedTools): ToolSet | undefined {
  if (!tools?.length) return undefined;
  const set: ToolSet = {};
  tools.forEach((t: any, i) => {
    if (t.type !== undefined && t.type !== 'custom') {
      // a server tool (web_search_…, code_execution_…) runs at Anthropic only
      hosted.drop(i, String(t.type), 'Anthropic');
      return;
    }
    set[t.name] = { description: t.description, inputSchema: jsonSchema(t.input_schema ?? { type: 'object', properties: {} }) } as ToolSet[string];
  });
  return Object.keys(set).length ? set : undefined;
}

function toToolChoice(c: Translated['tool_choice']): any {
  if (!c) return undefined;
  if (c.type === 'any') return 'required';
  if (c.type === 'tool') {
    if (!c.name) throw badRequest('invalid_input', 'tool_choice.name: required when type is "tool"', 'tool_choice.name');
    return { type: 'tool', toolName: c.name };
  }
  return c.type;
}

/** The AI SDK call for a Messages request (`ai`: the loaded SDK, whose jsonSchema wraps the tools' schemas). */
export function sdkRequest(ai: Ai, request: MessagesInput, strictHosted = false): SdkRequest {
  const input = validate(translatedInput, request);
  const hosted = new HostedTools(strictHosted);
  // thinking (adaptive, enabled, disabled) is dropped: the target reasons as its upstream does
  // by default (a reasoning option sent to a model without reasoning would fail the call)
  return {
    messages: toModelMessages(input),
    tools: toTools(ai, input.tools, hosted),
    dropped: hosted.dropped,
    toolChoice: toToolChoice(input.tool_choice),
    maxOutputTokens: request.max_tokens,
    temperature: input.temperature,
    topP: input.top_p,
    topK: input.top_k,
    stopSequences: input.stop_sequences,
  };
}

/** An estimate of the input tokens (no tokenizer): ~4 characters a token, images ~1,600. */
export function estimateTokens(input: { system?: unknown; messages: Record<string, unknown>[]; tools?: unknown }): number {
  let chars = textOf(input.system).length;
  let images = 0;
  for (const m of input.messages) {
    for (const b of blocks(m.content)) {
      if (b.type === 'text') chars += String(b.text ?? '').length;
      else if (b.type === 'image' || b.type === 'document') images++;
      else if (b.type === 'tool_use') chars += JSON.stringify(b.input ?? {}).length;
      else if (b.type === 'tool_result') chars += typeof b.content === 'string' ? b.content.length : textOf(b.content).length;
    }
  }
  if (Array.isArray(input.tools) && input.tools.length) chars += JSON.stringify(input.tools).length;
  return Math.ceil(chars / 4) + 1600 * images;
}
