// An AI SDK answer written as the Messages API: the message object, or its event stream
// (message_start, content_block_start / _delta / _stop, message_delta with usage, message_stop).
import { GatewayError } from '../../../kernel/errors.ts';
import type { StreamWriter, Used } from '../upstream/sdk-call.ts';
import { anthropicErrorEvent } from './errors.ts';

const STOP: Record<string, string> = { stop: 'end_turn', length: 'max_tokens', 'tool-calls': 'tool_use', 'content-filter': 'refusal' };
export const stopReason = (finish: string) => STOP[finish] ?? 'end_turn';

/** Anthropic counts cache writes and reads apart from input_tokens. */
export const usageOut = (u: Used) => ({
  input_tokens: Math.max(0, u.input_tokens - u.cached_tokens - u.cache_write_tokens),
  output_tokens: u.output_tokens,
  cache_creation_input_tokens: u.cache_write_tokens,
  cache_read_input_tokens: u.cached_tokens,
});

export function messageJson(id: string, model: string, res: { content: any[]; finishReason: string }, used: Used) {
  const content: any[] = [];
  for (const p of res.content) {
    if (p.type === 'text' && p.text) content.push({ type: 'text', text: p.text });
    else if (p.type === 'tool-call') content.push({ type: 'tool_use', id: p.toolCallId, name: p.toolName, input: p.input ?? {} });
  }
  return { id, type: 'message', role: 'assistant', model, content, stop_reason: stopReason(res.finishReason), stop_sequence: null, usage: usageOut(used) };
}

const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

export function messageStream(id: string, model: string): StreamWriter {
  let index = -1;
  let open: 'text' | null = null;
  const closeText = () => {
    if (open !== 'text') return '';
    open = null;
    return ev('content_block_stop', { index });
  };
  return {
    start: () =>
      ev('message_start', {
        message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } },
      }) + ev('ping', {}),
    part(p) {
      if (p.type === 'text-delta' && p.text) {
        let out = '';
        if (open !== 'text') {
          open = 'text';
          out += ev('content_block_start', { index: ++index, content_block: { type: 'text', text: '' } });
        }
        return out + ev('content_block_delta', { index, delta: { type: 'text_delta', text: p.text } });
      }
      if (p.type === 'tool-call') {
        const out = closeText();
        const at = ++index;
        return (
          out +
          ev('content_block_start', { index: at, content_block: { type: 'tool_use', id: p.toolCallId, name: p.toolName, input: {} } }) +
          ev('content_block_delta', { index: at, delta: { type: 'input_json_delta', partial_json: JSON.stringify(p.input ?? {}) } }) +
          ev('content_block_stop', { index: at })
        );
      }
      return '';
    },
    end: (used, finish) =>
      closeText() +
      // The upstream reports usage at the end: message_delta carries all of it (the SDK reads
      // input_tokens there too).
      ev('message_delta', { delta: { stop_reason: stopReason(finish), stop_sequence: null }, usage: usageOut(used) }) +
      ev('message_stop', {}),
    error: (e: GatewayError) => anthropicErrorEvent(e),
  };
}
