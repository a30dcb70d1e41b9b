// The Responses API request as citygate checks it, and its translation to an AI SDK call for
// upstreams that do not speak it. citygate keeps no responses: what would need stored state
// (previous_response_id, store: true, conversation, background) is a clear 400.
import type { ModelMessage, ToolSet } from 'ai';
import { z } from 'zod';
import { badRequest } from '../../../kernel/errors.ts';
import type { SdkRequest } from '../sdk-call.ts';
import type { Ai } from '../sdk.ts';

const STATELESS = 'citygate keeps no responses: send the whole conversation in `input` (store: false or no store)';

export const responsesInput = z
  .object({
    model: z.string().min(1).max(256),
    input: z.union([z.string(), z.array(z.object({}).loose()).min(1)]),
    instructions: z.string().nullish(),
    max_output_tokens: z.number().int().positive().nullish(),
    stream: z.boolean().nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().nullish(),
    tools: z.array(z.object({ type: z.string() }).loose()).nullish(),
    tool_choice: z.union([z.enum(['auto', 'none', 'required']), z.object({ type: z.string(), name: z.string().optional() }).loose()]).nullish(),
    text: z.object({ format: z.object({ type: z.string() }).loose().optional() }).loose().nullish(),
    previous_response_id: z.null({ error: STATELESS }).optional(),
    store: z.literal(false, { error: STATELESS }).nullish(),
    conversation: z.null({ error: STATELESS }).optional(),
    background: z.literal(false, { error: 'background responses are not supported' }).nullish(),
    city_id: z.string().optional(),
  })
  .loose();
export type ResponsesInput = z.output<typeof responsesInput>;

type Item = Record<string, any>;

function partsOf(content: unknown, at: string): any[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw badRequest('invalid_input', `${at}: expected a string or a list of content parts`, at);
  return content.map((p: Item, j) => {
    const here = `${at}.${j}`;
    switch (p?.type) {
      case 'input_text':
      case 'output_text':
      case 'text':
        return { type: 'text', text: String(p.text ?? '') };
      case 'refusal':
        return { type: 'text', text: String(p.refusal ?? '') };
      case 'input_image': {
        const url = typeof p.image_url === 'string' ? p.image_url : p.image_url?.url;
        if (typeof url !== 'string') throw badRequest('invalid_input', `${here}: an input_image needs image_url (file ids are not supported)`, here);
        try {
          return { type: 'image', image: new URL(url) };
        } catch {
          throw badRequest('invalid_input', `${here}.image_url: not a URL`, `${here}.image_url`);
        }
      }
      case 'input_file': {
        const m = typeof p.file_data === 'string' ? /^data:([^;,]+);base64,(.*)$/s.exec(p.file_data) : null;
        if (!m) throw badRequest('invalid_input', `${here}: an input_file needs file_data as a base64 data URL (file ids are not supported)`, here);
        return { type: 'file', data: m[2], mediaType: m[1], filename: p.filename };
      }
      default:
        throw badRequest('invalid_input', `${here}.type: '${p?.type}' is not supported`, `${here}.type`);
    }
  });
}

const textOf = (parts: any[]) => parts.map((p) => (p.type === 'text' ? p.text : '')).join('\n');

/** Responses input items (and instructions) → AI SDK model messages. */
export function toModelMessages(input: ResponsesInput): ModelMessage[] {
  const out: ModelMessage[] = [];
  if (input.instructions) out.push({ role: 'system', content: input.instructions });
  if (typeof input.input === 'string') {
    out.push({ role: 'user', content: input.input });
    return out;
  }
  const names = new Map<string, string>();
  const lastAssistant = (): any[] => {
    const last = out[out.length - 1];
    if (last?.role === 'assistant' && Array.isArray(last.content)) return last.content as any[];
    const content: any[] = [];
    out.push({ role: 'assistant', content });
    return content;
  };
  input.input.forEach((item: Item, i) => {
    const at = `input.${i}`;
    const type = item.type ?? 'message';
    if (type === 'message') {
      const parts = partsOf(item.content, `${at}.content`);
      if (item.role === 'system' || item.role === 'developer') out.push({ role: 'system', content: textOf(parts) });
      else if (item.role === 'user') out.push({ role: 'user', content: parts });
      else if (item.role === 'assistant') lastAssistant().push(...parts.filter((p) => p.type === 'text' && p.text));
      else throw badRequest('invalid_input', `${at}.role: expected user, assistant, system or developer`, `${at}.role`);
    } else if (type === 'function_call') {
      let args: unknown = {};
      try {
        args = JSON.parse(item.arguments || '{}');
      } catch {
        throw badRequest('invalid_input', `${at}.arguments: must be JSON`, `${at}.arguments`);
      }
      names.set(String(item.call_id), String(item.name));
      lastAssistant().push({ type: 'tool-call', toolCallId: String(item.call_id), toolName: String(item.name), input: args });
    } else if (type === 'function_call_output') {
      const id = String(item.call_id ?? '');
      const value = typeof item.output === 'string' ? item.output : textOf(partsOf(item.output, `${at}.output`));
      const part = { type: 'tool-result', toolCallId: id, toolName: names.get(id) ?? 'tool', output: { type: 'text', value } };
      const last = out[out.length - 1];
      if (last?.role === 'tool') (last.content as any[]).push(part);
      else out.push({ role: 'tool', content: [part] } as ModelMessage);
    } else if (type === 'reasoning') {
      // reasoning belongs to the model that wrote it: not replayed to another one
    } else throw badRequest('invalid_input', `${at}.type: '${type}' items are not supported on this model's upstream`, `${at}.type`);
  });
  return out;
}

function toTools({ jsonSchema }: Ai, tools: ResponsesInput['tools']): ToolSet | undefined {
  if (!tools?.length) return undefined;
  const set: ToolSet = {};
  tools.forEach((t: Item, i) => {
    if (t.type !== 'function' || typeof t.name !== 'string') {
      throw badRequest('invalid_input', `tools.${i}: only function tools are supported on this model's upstream (got '${t.type}')`, `tools.${i}.type`);
    }
    set[t.name] = { description: t.description ?? undefined, inputSchema: jsonSchema(t.parameters ?? { type: 'object', properties: {} }) } as ToolSet[string];
  });
  return set;
}

function toToolChoice(c: ResponsesInput['tool_choice']): any {
  if (c == null || typeof c === 'string') return c ?? undefined;
  if (c.type === 'function' && c.name) return { type: 'tool', toolName: c.name };
  throw badRequest('invalid_input', 'tool_choice: expected "auto", "none", "required" or {type: "function", name}', 'tool_choice');
}

function toOutput({ jsonSchema, Output }: Ai, text: ResponsesInput['text']): any {
  const f = text?.format as Item | undefined;
  if (!f || f.type === 'text') return undefined;
  if (f.type === 'json_object') return Output.json();
  if (f.type === 'json_schema' && f.schema) return Output.object({ schema: jsonSchema(f.schema), name: f.name });
  throw badRequest('invalid_input', 'text.format: expected text, json_object or json_schema', 'text.format');
}

/** The AI SDK call for a Responses request (`ai`: the loaded SDK, for jsonSchema and Output). */
export function sdkRequest(ai: Ai, input: ResponsesInput): SdkRequest {
  return {
    messages: toModelMessages(input),
    tools: toTools(ai, input.tools),
    toolChoice: toToolChoice(input.tool_choice),
    output: toOutput(ai, input.text),
    maxOutputTokens: input.max_output_tokens ?? undefined,
    temperature: input.temperature ?? undefined,
    topP: input.top_p ?? undefined,
  };
}
