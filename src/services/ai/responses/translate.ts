// An AI SDK answer written as the Responses API: the response object, or its typed event
// stream (response.created … output_text deltas, function call arguments … response.completed
// with usage), numbered by sequence_number as OpenAI numbers them.
import type { GatewayError } from '../../../kernel/errors.ts';
import type { StreamWriter, Used } from '../upstream/sdk-call.ts';
import type { DeclaredTool, ResponsesInput } from './input.ts';

export interface Meta {
  id: string;
  model: string;
  createdAt: number;
  input: ResponsesInput;
  /** Namespace members and custom tools (input.ts declaredToolsOf): their calls go back as declared. */
  names: Map<string, DeclaredTool> | null;
}

const usageOut = (u: Used) => ({
  input_tokens: u.input_tokens,
  input_tokens_details: { cached_tokens: u.cached_tokens },
  output_tokens: u.output_tokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: u.input_tokens + u.output_tokens,
});

/** The response object; `status` and `usage` as of now (in_progress: none yet). */
function responseObject(m: Meta, status: 'in_progress' | 'completed' | 'incomplete', output: any[], used: Used | null) {
  const i = m.input;
  return {
    id: m.id,
    object: 'response',
    created_at: m.createdAt,
    status,
    background: false,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: i.instructions ?? null,
    max_output_tokens: i.max_output_tokens ?? null,
    model: m.model,
    output,
    parallel_tool_calls: (i as any).parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: i.temperature ?? 1,
    text: { format: i.text?.format ?? { type: 'text' } },
    tool_choice: i.tool_choice ?? 'auto',
    tools: i.tools ?? [],
    top_p: i.top_p ?? 1,
    truncation: 'disabled',
    usage: used ? usageOut(used) : null,
    metadata: (i as any).metadata ?? {},
  };
}

const statusOf = (finish: string) => (finish === 'length' ? 'incomplete' : 'completed');

const messageItem = (id: string, text: string, status: string) => ({
  type: 'message',
  id,
  status,
  role: 'assistant',
  content: status === 'in_progress' ? [] : [{ type: 'output_text', text, annotations: [], logprobs: [] }],
});
/** A function_call item, or a custom_tool_call for a custom tool (its input: the `input` argument, as text). */
const callItem = (m: Meta, id: string, p: any, status: string) => {
  const d = m.names?.get(p.toolName);
  const head = { id, call_id: p.toolCallId, name: d ? d.name : p.toolName, ...(d?.namespace ? { namespace: d.namespace } : {}) };
  const done = status !== 'in_progress';
  if (d?.custom) return { type: 'custom_tool_call', ...head, input: done ? customInput(p.input) : '', status };
  return { type: 'function_call', ...head, arguments: done ? JSON.stringify(p.input ?? {}) : '', status };
};
const callId = (m: Meta, p: any, n: number) => `${m.names?.get(p.toolName)?.custom ? 'ctc' : 'fc'}_${m.id.slice(5)}_${n}`;
const customInput = (args: any) => (typeof args?.input === 'string' ? args.input : JSON.stringify(args ?? {}));

export function responseJson(m: Meta, res: { content: any[]; finishReason: string }, used: Used) {
  const output: any[] = [];
  let n = 0;
  const text = res.content.filter((p) => p.type === 'text').map((p) => p.text).join('');
  if (text) output.push(messageItem(`msg_${m.id.slice(5)}_${n++}`, text, 'completed'));
  for (const p of res.content) if (p.type === 'tool-call') output.push(callItem(m, callId(m, p, n++), p, 'completed'));
  return responseObject(m, statusOf(res.finishReason), output, used);
}

export function responseStream(m: Meta): StreamWriter {
  let seq = 0;
  const output: any[] = [];
  let open: { id: string; index: number; text: string } | null = null;
  const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data, sequence_number: seq++ })}\n\n`;
  const itemId = (prefix: string) => `${prefix}_${m.id.slice(5)}_${output.length}`;
  const closeText = () => {
    if (!open) return '';
    const o = open;
    open = null;
    const part = { type: 'output_text', text: o.text, annotations: [], logprobs: [] };
    const item = messageItem(o.id, o.text, 'completed');
    output[o.index] = item;
    return (
      ev('response.output_text.done', { item_id: o.id, output_index: o.index, content_index: 0, text: o.text, logprobs: [] }) +
      ev('response.content_part.done', { item_id: o.id, output_index: o.index, content_index: 0, part }) +
      ev('response.output_item.done', { output_index: o.index, item })
    );
  };
  return {
    start: () =>
      ev('response.created', { response: responseObject(m, 'in_progress', [], null) }) + ev('response.in_progress', { response: responseObject(m, 'in_progress', [], null) }),
    part(p) {
      if (p.type === 'text-delta' && p.text) {
        let out = '';
        if (!open) {
          open = { id: itemId('msg'), index: output.length, text: '' };
          const item = messageItem(open.id, '', 'in_progress');
          output.push(item);
          out +=
            ev('response.output_item.added', { output_index: open.index, item }) +
            ev('response.content_part.added', { item_id: open.id, output_index: open.index, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
        }
        open.text += p.text;
        return out + ev('response.output_text.delta', { item_id: open.id, output_index: open.index, content_index: 0, delta: p.text, logprobs: [] });
      }
      if (p.type === 'tool-call') {
        let out = closeText();
        const index = output.length;
        const id = callId(m, p, index);
        const item = callItem(m, id, p, 'completed') as any;
        output.push(item);
        out += ev('response.output_item.added', { output_index: index, item: callItem(m, id, p, 'in_progress') });
        if (item.type === 'custom_tool_call') {
          out +=
            ev('response.custom_tool_call_input.delta', { item_id: id, output_index: index, delta: item.input }) +
            ev('response.custom_tool_call_input.done', { item_id: id, output_index: index, input: item.input });
        } else {
          out +=
            ev('response.function_call_arguments.delta', { item_id: id, output_index: index, delta: item.arguments }) +
            ev('response.function_call_arguments.done', { item_id: id, output_index: index, name: item.name, arguments: item.arguments });
        }
        return out + ev('response.output_item.done', { output_index: index, item });
      }
      return '';
    },
    end(used, finish) {
      const status = statusOf(finish);
      const out = closeText();
      return out + ev(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: responseObject(m, status, output, used) });
    },
    error: (e: GatewayError) => ev('error', { code: e.code, message: e.message, param: e.param ?? null }),
  };
}

/** A compaction's answer (compaction.ts): the response whose one output item is the compaction item, as JSON. */
export function compactionJson(m: Meta, item: object, used: Used) {
  return responseObject(m, 'completed', [item], used);
}

/** The same as the event stream OpenAI sends for a compaction_trigger: created … the one item … completed. */
export function compactionEvents(m: Meta, item: object, used: Used): string {
  let seq = 0;
  const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data, sequence_number: seq++ })}\n\n`;
  const pending = responseObject(m, 'in_progress', [], null);
  return (
    ev('response.created', { response: pending }) +
    ev('response.in_progress', { response: pending }) +
    ev('response.output_item.added', { output_index: 0, item }) +
    ev('response.output_item.done', { output_index: 0, item }) +
    ev('response.completed', { response: responseObject(m, 'completed', [item], used) })
  );
}

/** POST /responses/compact's answer: the user messages kept, then the one compaction item. */
export function compactedJson(m: Meta, kept: object[], item: object, used: Used) {
  return { id: m.id, object: 'response.compaction', created_at: m.createdAt, output: [...kept, item], usage: usageOut(used) };
}

/** A `generate: false` turn (the WebSocket warm-up): a completed response with no output and no usage. */
export function warmUpJson(m: Meta) {
  return responseObject(m, 'completed', [], { input_tokens: 0, output_tokens: 0, cached_tokens: 0, cache_write_tokens: 0, cache_write_1h_tokens: 0 });
}

export function warmUpEvents(m: Meta): string {
  let seq = 0;
  const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data, sequence_number: seq++ })}\n\n`;
  return ev('response.created', { response: responseObject(m, 'in_progress', [], null) }) + ev('response.completed', { response: warmUpJson(m) });
}
