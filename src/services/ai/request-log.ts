// How each streamed API's events are put back together for a request log (kernel/request-log.ts):
// the log keeps the answer a client assembled, in the shape of that API's whole (non-stream)
// answer where there is one, not the raw events. Runs only for logged calls, as events pass.
import type { RequestLogSpec, StreamAssembler } from '../../kernel/request-log.ts';

type Obj = Record<string, any>;
const parse = (data: string): Obj | null => {
  if (!data || data[0] !== '{') return null; // [DONE], pings
  const v = JSON.parse(data);
  return v && typeof v === 'object' ? v : null;
};

/** Chat Completions chunks → one chat.completion. */
function chatCompletion(): StreamAssembler {
  let head: Obj = {};
  const choices = new Map<number, { message: Obj; finish_reason: unknown; tools: Map<number, Obj> }>();
  let usage: unknown;
  let error: unknown;
  return {
    event(_name, data) {
      const c = parse(data);
      if (!c) return;
      if (c.error) error = c.error;
      if (c.id && !head.id) head = { id: c.id, created: c.created, model: c.model, system_fingerprint: c.system_fingerprint };
      if (c.usage) usage = c.usage;
      for (const ch of c.choices ?? []) {
        const i = ch.index ?? 0;
        let s = choices.get(i);
        if (!s) choices.set(i, (s = { message: { role: 'assistant', content: null }, finish_reason: null, tools: new Map() }));
        const d = ch.delta ?? {};
        if (typeof d.content === 'string') s.message.content = (s.message.content ?? '') + d.content;
        for (const k of ['reasoning_content', 'reasoning', 'refusal']) if (typeof d[k] === 'string') s.message[k] = (s.message[k] ?? '') + d[k];
        for (const t of d.tool_calls ?? []) {
          const ti = t.index ?? 0;
          let tc = s.tools.get(ti);
          if (!tc) s.tools.set(ti, (tc = { id: t.id, type: t.type ?? 'function', function: { name: '', arguments: '' } }));
          if (t.id) tc.id = t.id;
          if (t.function?.name) tc.function.name += t.function.name;
          if (t.function?.arguments) tc.function.arguments += t.function.arguments;
        }
        if (ch.finish_reason) s.finish_reason = ch.finish_reason;
      }
    },
    result() {
      const out: Obj = {
        ...head,
        object: 'chat.completion',
        choices: [...choices].map(([index, s]) => ({ index, message: s.tools.size ? { ...s.message, tool_calls: [...s.tools.values()] } : s.message, finish_reason: s.finish_reason })),
      };
      if (usage) out.usage = usage;
      if (error) out.error = error;
      return out;
    },
  };
}

/** Responses events → the final response object (or the text so far when the stream was cut). */
function responses(): StreamAssembler {
  let last: Obj | null = null;
  let text = '';
  let error: unknown;
  return {
    event(_name, data) {
      const e = parse(data);
      if (!e) return;
      if (e.response && typeof e.response === 'object') last = e.response;
      if (e.type === 'response.output_text.delta' && typeof e.delta === 'string') text += e.delta;
      if (e.type === 'error') error = e.error ?? { code: e.code, message: e.message };
    },
    result() {
      const done = last && (last.status === 'completed' || last.status === 'incomplete' || last.status === 'failed');
      const out: Obj = done ? { ...last } : { ...(last ?? {}), output_text: text, partial: true };
      if (error) out.error = error;
      return out;
    },
  };
}

/** Messages events → one message. */
function messages(): StreamAssembler {
  let message: Obj = {};
  const blocks: Obj[] = [];
  const json = new Map<number, string>();
  let error: unknown;
  return {
    event(_name, data) {
      const e = parse(data);
      if (!e) return;
      switch (e.type) {
        case 'message_start':
          message = { ...e.message, content: [] };
          break;
        case 'content_block_start':
          blocks[e.index] = { ...e.content_block };
          break;
        case 'content_block_delta': {
          const b = (blocks[e.index] ??= { type: 'text', text: '' });
          const d = e.delta ?? {};
          if (d.type === 'text_delta') b.text = (b.text ?? '') + d.text;
          else if (d.type === 'thinking_delta') b.thinking = (b.thinking ?? '') + d.thinking;
          else if (d.type === 'input_json_delta') json.set(e.index, (json.get(e.index) ?? '') + d.partial_json);
          break;
        }
        case 'message_delta':
          Object.assign(message, e.delta ?? {});
          if (e.usage) message.usage = { ...message.usage, ...e.usage };
          break;
        case 'error':
          error = e.error;
          break;
      }
    },
    result() {
      for (const [i, text] of json) {
        try {
          blocks[i].input = JSON.parse(text);
        } catch {
          blocks[i].input = text; // cut short
        }
      }
      const out: Obj = { ...message, content: blocks.filter(Boolean) };
      if (error) out.error = error;
      return out;
    },
  };
}

/** AI SDK UI message stream → one UI message (parts). */
function uiMessage(): StreamAssembler {
  const msg: Obj = { role: 'assistant', parts: [] };
  const open = new Map<string, Obj>();
  const tools = new Map<string, Obj>();
  /** A new text or reasoning part under this id (a start); a delta adds to the open one, made if it never started. */
  const newPart = (type: 'text' | 'reasoning', id: unknown): Obj => {
    const p = { type, text: '' };
    open.set(`${type}:${id}`, p);
    msg.parts.push(p);
    return p;
  };
  const textPart = (type: 'text' | 'reasoning', id: unknown): Obj => open.get(`${type}:${id}`) ?? newPart(type, id);
  return {
    event(_name, data) {
      const c = parse(data);
      if (!c) return;
      switch (c.type) {
        case 'start':
          if (c.messageId) msg.id = c.messageId;
          break;
        case 'text-start':
        case 'reasoning-start':
          newPart(c.type === 'text-start' ? 'text' : 'reasoning', c.id);
          break;
        case 'text-delta':
        case 'reasoning-delta':
          textPart(c.type === 'text-delta' ? 'text' : 'reasoning', c.id).text += c.delta ?? '';
          break;
        case 'tool-input-available':
        case 'tool-output-available':
        case 'tool-input-start': {
          let t = tools.get(c.toolCallId);
          if (!t) tools.set(c.toolCallId, (t = { type: `tool-${c.toolName ?? 'unknown'}`, toolCallId: c.toolCallId })), msg.parts.push(t);
          if ('input' in c) t.input = c.input;
          if ('output' in c) t.output = c.output;
          break;
        }
        case 'finish':
          msg.finish = { ...c };
          delete msg.finish.type;
          if (c.messageMetadata) msg.metadata = c.messageMetadata;
          break;
        case 'message-metadata':
          msg.metadata = c.messageMetadata;
          break;
        case 'error':
          msg.error = c.errorText;
          break;
      }
    },
    result: () => msg,
  };
}

/** Gemini responses (streamGenerateContent) → one GenerateContentResponse: the parts joined, the last finish reason and usage. */
function gemini(): StreamAssembler {
  const parts: Obj[] = [];
  let last: Obj = {};
  let finishReason: unknown;
  let error: unknown;
  return {
    event(_name, data) {
      const c = parse(data);
      if (!c) return;
      if (c.error) error = c.error;
      const cand = c.candidates?.[0];
      for (const p of cand?.content?.parts ?? []) {
        const prev = parts.at(-1);
        if (typeof p.text === 'string' && prev && typeof prev.text === 'string' && !!prev.thought === !!p.thought) prev.text += p.text;
        else parts.push({ ...p });
      }
      if (cand?.finishReason) finishReason = cand.finishReason;
      last = { ...last, ...c };
    },
    result() {
      const out: Obj = { candidates: [{ content: { role: 'model', parts }, ...(finishReason ? { finishReason } : {}), index: 0 }] };
      if (last.usageMetadata) out.usageMetadata = last.usageMetadata;
      if (last.modelVersion) out.modelVersion = last.modelVersion;
      if (last.responseId) out.responseId = last.responseId;
      if (error) out.error = error;
      return out;
    },
  };
}

export const logGemini: RequestLogSpec = { assemble: gemini };
export const logChat: RequestLogSpec = { assemble: chatCompletion };
export const logResponses: RequestLogSpec = { assemble: responses };
export const logMessages: RequestLogSpec = { assemble: messages };
export const logUiStream: RequestLogSpec = { assemble: uiMessage };
/** Actions whose answers are never event streams (JSON, audio, jobs). */
export const logWhole: RequestLogSpec = {};
