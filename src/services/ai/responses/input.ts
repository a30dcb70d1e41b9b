// The Responses API request as citygate checks it, and its translation to an AI SDK call for
// upstreams that do not speak it. citygate keeps no responses: what would need stored state
// (previous_response_id, store: true, conversation, background) is a clear 400.
import type { ModelMessage, ToolSet } from 'ai';
import { z } from 'zod';
import { badRequest } from '../../../kernel/errors.ts';
import { HostedTools } from '../upstream/hosted-tools.ts';
import type { SdkRequest } from '../upstream/sdk-call.ts';
import type { Ai } from '../upstream/sdk.ts';

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
    /** false: the WebSocket mode's warm-up (no model call; index.ts warmUp). */
    generate: z.boolean().optional(),
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
  const answered = new Set<string>();
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
      const name = flatName(item.namespace, String(item.name));
      names.set(String(item.call_id), name);
      lastAssistant().push({ type: 'tool-call', toolCallId: String(item.call_id), toolName: name, input: args });
    } else if (type === 'custom_tool_call') {
      // a custom tool's free-form input travels as the one string argument of a function tool
      const name = flatName(item.namespace, String(item.name));
      names.set(String(item.call_id), name);
      lastAssistant().push({ type: 'tool-call', toolCallId: String(item.call_id), toolName: name, input: { input: String(item.input ?? '') } });
    } else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
      const id = String(item.call_id ?? '');
      // as OpenAI: an output answers a call that comes before it (a chat upstream refuses an orphan)
      if (!names.has(id)) throw badRequest('invalid_input', `${at}.call_id: no function_call or custom_tool_call with call_id '${id}' comes before this output`, `${at}.call_id`);
      answered.add(id);
      const value = typeof item.output === 'string' ? item.output : textOf(partsOf(item.output, `${at}.output`));
      const part = { type: 'tool-result', toolCallId: id, toolName: names.get(id) ?? 'tool', output: { type: 'text', value } };
      const last = out[out.length - 1];
      if (last?.role === 'tool') (last.content as any[]).push(part);
      else out.push({ role: 'tool', content: [part] } as ModelMessage);
    } else if (type === 'compaction' || type === 'compaction_summary') {
      // citygate's own were opened into a user message before (compaction.ts openCompactions)
      throw badRequest('invalid_input', `${at}: this compaction item was made by OpenAI and only an OpenAI upstream can read it; this model's upstream is not one`, `${at}.encrypted_content`);
    } else if (type === 'reasoning' || HOSTED_CALLS.has(type)) {
      // reasoning belongs to the model that wrote it, and a hosted tool's call ran at the
      // provider that offers it: neither is replayed to another model
    } else throw badRequest('invalid_input', `${at}.type: '${type}' items are not supported on this model's upstream`, `${at}.type`);
  });
  if (answered.size < names.size) {
    // as OpenAI: every call has its output (the AI SDK refuses a prompt with one missing)
    const at = (input.input as Item[]).findIndex((i) => (i?.type === 'function_call' || i?.type === 'custom_tool_call') && !answered.has(String(i.call_id)));
    throw badRequest('invalid_input', `input.${at}: no output for the call '${(input.input as Item[])[at].call_id}' follows it`, `input.${at}.call_id`);
  }
  return out;
}

/** Tools that run at the provider (OpenAI), not at the client: another upstream cannot run them. */
const HOSTED = new Set(['web_search', 'web_search_preview', 'web_search_2025_08_26', 'file_search', 'code_interpreter', 'image_generation', 'computer_use_preview', 'mcp', 'tool_search']);
/** Their calls in a replayed conversation. */
const HOSTED_CALLS = new Set(['web_search_call', 'file_search_call', 'code_interpreter_call', 'image_generation_call', 'computer_call', 'mcp_call', 'mcp_list_tools', 'tool_search_call']);

/**
 * A namespace member's name as a translated upstream sees it: `<namespace>__<name>` (a plain
 * function name: letters, digits, _ and -). Answers give it back split (namespaceOf).
 */
export const flatName = (namespace: unknown, name: string) => (typeof namespace === 'string' && namespace ? `${namespace}__${name}` : name);

/** A declared tool as the client named it: its namespace (if in one), and whether it is a custom (free-form input) tool. */
export interface DeclaredTool {
  name: string;
  namespace?: string;
  custom?: true;
}

/**
 * The flat names of a request's tools that answers must give back otherwise: namespace members
 * (under their namespace and name) and custom tools (as custom_tool_call items). Null: none.
 */
export function declaredToolsOf(tools: ResponsesInput['tools']): Map<string, DeclaredTool> | null {
  let map: Map<string, DeclaredTool> | null = null;
  const add = (t: Item, namespace?: string) => {
    if (typeof t?.name !== 'string' || (!namespace && t.type !== 'custom')) return;
    (map ??= new Map()).set(flatName(namespace, t.name), { name: t.name, ...(namespace ? { namespace } : {}), ...(t.type === 'custom' ? { custom: true as const } : {}) });
  };
  for (const t of tools ?? []) {
    if (t.type === 'namespace' && Array.isArray(t.tools)) for (const m of t.tools as Item[]) add(m, String(t.name));
    else add(t);
  }
  return map;
}

/**
 * A custom tool as a function tool: its free-form input is the one string argument `input`.
 * A grammar the upstream cannot enforce is given to the model as the argument's description.
 */
function customSchema(t: Item): object {
  const f = t.format as Item | undefined;
  const description =
    f?.type === 'grammar' && typeof f.definition === 'string'
      ? `The tool's input, as raw text that follows this ${f.syntax ?? ''} grammar:\n${f.definition}`
      : "The tool's input, as raw text.";
  return { type: 'object', properties: { input: { type: 'string', description } }, required: ['input'], additionalProperties: false };
}

function toTools({ jsonSchema }: Ai, tools: ResponsesInput['tools'], hosted: HostedTools): ToolSet | undefined {
  if (!tools?.length) return undefined;
  const set: ToolSet = {};
  const add = (t: Item, name: string) => {
    const schema = t.type === 'custom' ? customSchema(t) : (t.parameters ?? { type: 'object', properties: {} });
    set[name] = { description: t.description ?? undefined, inputSchema: jsonSchema(schema) } as ToolSet[string];
  };
  const callable = (t: Item) => (t?.type === 'function' || t?.type === 'custom') && typeof t.name === 'string';
  tools.forEach((t: Item, i) => {
    if (callable(t)) add(t, t.name);
    else if (t.type === 'namespace' && typeof t.name === 'string' && Array.isArray(t.tools)) {
      // a group of tools (Codex's multi_agent_v1): flattened, each under <namespace>__<name>
      t.tools.forEach((m: Item, j: number) => {
        if (!callable(m)) {
          throw badRequest('invalid_input', `tools.${i}.tools.${j}: only function and custom tools are supported inside a namespace on this model's upstream (got '${m?.type}')`, `tools.${i}.tools.${j}.type`);
        }
        add(m, flatName(t.name, m.name));
      });
    } else if (HOSTED.has(t.type)) hosted.drop(i, t.type, 'OpenAI');
    else throw badRequest('invalid_input', `tools.${i}: only function, custom and namespace tools are supported on this model's upstream (got '${t.type}')`, `tools.${i}.type`);
  });
  return Object.keys(set).length ? set : undefined;
}

function toToolChoice(c: ResponsesInput['tool_choice']): any {
  if (c == null || typeof c === 'string') return c ?? undefined;
  if ((c.type === 'function' || c.type === 'custom') && c.name) return { type: 'tool', toolName: flatName(c.namespace, c.name) };
  throw badRequest('invalid_input', 'tool_choice: expected "auto", "none", "required" or {type: "function" or "custom", name}', 'tool_choice');
}

function toOutput({ jsonSchema, Output }: Ai, text: ResponsesInput['text']): any {
  const f = text?.format as Item | undefined;
  if (!f || f.type === 'text') return undefined;
  if (f.type === 'json_object') return Output.json();
  if (f.type === 'json_schema' && f.schema) return Output.object({ schema: jsonSchema(f.schema), name: f.name });
  throw badRequest('invalid_input', 'text.format: expected text, json_object or json_schema', 'text.format');
}

/** The AI SDK call for a Responses request (`ai`: the loaded SDK, for jsonSchema and Output). */
export function sdkRequest(ai: Ai, input: ResponsesInput, strictHosted = false): SdkRequest {
  const hosted = new HostedTools(strictHosted);
  return {
    messages: toModelMessages(input),
    tools: toTools(ai, input.tools, hosted),
    dropped: hosted.dropped,
    toolChoice: toToolChoice(input.tool_choice),
    output: toOutput(ai, input.text),
    maxOutputTokens: input.max_output_tokens ?? undefined,
    temperature: input.temperature ?? undefined,
    topP: input.top_p ?? undefined,
  };
}
