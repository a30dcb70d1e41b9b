// Deterministic chat/completions behaviour of the OpenAI stub: what it replies, how many
// tokens it reports, and the JSON / SSE bodies it sends. No I/O here; see openai.ts.
//
// Token counts (what tests can compute):
//   words(s)          = number of whitespace-separated words in s (s.split(/\s+/), empties dropped)
//   text(message)     = message.content if it is a string; for an array of parts, the `text` of
//                       its text parts joined by " "; "" for null / missing content
//   prompt_tokens     = Σ over messages (words(text(message)) + 3)
//   completion_tokens = words(content) of the reply, times `n`; for a tool call,
//                       words(function.arguments)
//   total_tokens      = prompt_tokens + completion_tokens
//   cached_tokens     = 0, or floor(prompt_tokens / 2) when the request has a `prompt_cache_key`
//
// Reply content (before truncation):
//   last message from "tool"  → "Tool result received: <words of that tool message>"
//   otherwise                 → "Hello from stub: <words of the last user message>"
//   words are re-joined with single spaces, so content === words(content).join(" ").
//   response_format json_object → JSON.stringify({ reply: <that text> })
//   response_format json_schema → a JSON value built from the schema: every property present,
//                                 strings = <that text>, numbers = its word count, booleans true,
//                                 arrays one item, enums/const their first value
//   `stop` (string or array)    → content cut before the earliest stop sequence, finish "stop"
//   max_completion_tokens ?? max_tokens = N → content cut to its first N words, finish "length"
//
// Tool calls: when `tools` is non-empty, `tool_choice` is not "none" and the last message is
// from the user, the reply is one call of the tool forced by tool_choice (else the first tool),
// id "call_stub_<seq>", arguments JSON.stringify({ <key>: <last user text> }) where <key> is
// the first string-typed property of the tool's parameters, else "query"; finish "tool_calls".

export type ChatMessage = {
  role?: string;
  content?: unknown;
  name?: string;
  tool_call_id?: string;
  tool_calls?: unknown;
};

export type ChatRequest = {
  model?: unknown;
  messages?: unknown;
  stream?: unknown;
  stream_options?: { include_usage?: unknown } | null;
  n?: unknown;
  max_tokens?: unknown;
  max_completion_tokens?: unknown;
  stop?: unknown;
  tools?: unknown;
  tool_choice?: unknown;
  response_format?: unknown;
  prompt_cache_key?: unknown;
};

export type ToolCall = { id: string; name: string; arguments: string };

export type ChatPlan = {
  content: string | null;
  toolCall: ToolCall | null;
  finishReason: "stop" | "length" | "tool_calls";
  n: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
};

export function countWords(text: string): number {
  let count = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // ASCII whitespace fast path; other Unicode spaces checked by regex
    const space = c === 32 || (c >= 9 && c <= 13) || (c > 127 && /\s/.test(text[i]));
    if (space) inWord = false;
    else if (!inWord) {
      inWord = true;
      count++;
    }
  }
  return count;
}

export function words(text: string): string[] {
  return text.split(/\s+/).filter((w) => w.length > 0);
}

export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let out = "";
  for (const part of content) {
    if (part && typeof part === "object" && typeof (part as { text?: unknown }).text === "string") {
      out = out.length ? out + " " + (part as { text: string }).text : (part as { text: string }).text;
    }
  }
  return out;
}

export function promptTokens(messages: ChatMessage[]): number {
  let total = 0;
  for (const m of messages) total += countWords(messageText(m?.content)) + 3;
  return total;
}

/** Text of every message, for trigger checks (TRIGGER_CONTEXT_LENGTH). */
export function allMessagesContain(messages: ChatMessage[], needle: string): boolean {
  for (const m of messages) if (messageText(m?.content).includes(needle)) return true;
  return false;
}

function lastUserText(messages: ChatMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === "user") return words(messageText(messages[i].content)).join(" ");
  }
  return "";
}

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
};

function sampleFromSchema(schema: JsonSchema | undefined, text: string, depth = 0): unknown {
  if (!schema || typeof schema !== "object" || depth > 8) return text;
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  const alt = schema.anyOf ?? schema.oneOf ?? schema.allOf;
  if (Array.isArray(alt) && alt.length) return sampleFromSchema(alt[0], text, depth + 1);
  let type = schema.type;
  if (Array.isArray(type)) type = type.find((t) => t !== "null") ?? "null";
  if (!type) type = schema.properties ? "object" : "string";
  switch (type) {
    case "object": {
      const out: Record<string, unknown> = {};
      for (const [key, sub] of Object.entries(schema.properties ?? {})) out[key] = sampleFromSchema(sub, text, depth + 1);
      return out;
    }
    case "array":
      return [sampleFromSchema(schema.items, text, depth + 1)];
    case "number":
    case "integer":
      return countWords(text);
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return text;
  }
}

type ToolDef = { type?: string; function?: { name?: string; parameters?: JsonSchema } };

function pickTool(tools: ToolDef[], toolChoice: unknown): ToolDef | undefined {
  if (toolChoice && typeof toolChoice === "object") {
    const name = (toolChoice as { function?: { name?: unknown } }).function?.name;
    if (typeof name === "string") {
      const forced = tools.find((t) => t?.function?.name === name);
      if (forced) return forced;
    }
  }
  return tools.find((t) => typeof t?.function?.name === "string");
}

function argumentKey(parameters: JsonSchema | undefined): string {
  const props = parameters?.properties;
  if (props && typeof props === "object") {
    for (const [key, sub] of Object.entries(props)) {
      const t = sub?.type;
      if (t === undefined || t === "string" || (Array.isArray(t) && t.includes("string"))) return key;
    }
  }
  return "query";
}

function positiveInt(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : undefined;
}

/** Decide the whole answer for a validated chat request. `seq` numbers ids deterministically. */
export function planChat(body: ChatRequest, messages: ChatMessage[], seq: number, forcedWords?: number): ChatPlan {
  const n = positiveInt(body.n) ?? 1;
  const prompt = promptTokens(messages);
  const cached = typeof body.prompt_cache_key === "string" ? Math.floor(prompt / 2) : 0;
  const last = messages[messages.length - 1];

  const tools = Array.isArray(body.tools) ? (body.tools as ToolDef[]) : [];
  if (tools.length && body.tool_choice !== "none" && last?.role === "user" && forcedWords === undefined) {
    const tool = pickTool(tools, body.tool_choice);
    if (tool?.function?.name) {
      const args = JSON.stringify({ [argumentKey(tool.function.parameters)]: lastUserText(messages) });
      return {
        content: null,
        toolCall: { id: `call_stub_${seq}`, name: tool.function.name, arguments: args },
        finishReason: "tool_calls",
        n: 1,
        promptTokens: prompt,
        completionTokens: countWords(args),
        cachedTokens: cached,
      };
    }
  }

  let text: string;
  if (forcedWords !== undefined) {
    text = Array.from({ length: forcedWords }, (_, i) => `w${i + 1}`).join(" ");
  } else if (last?.role === "tool") {
    text = "Tool result received: " + words(messageText(last.content)).join(" ");
  } else {
    const user = lastUserText(messages);
    text = user ? "Hello from stub: " + user : "Hello from stub:";
  }

  const format = body.response_format as { type?: unknown; json_schema?: { schema?: JsonSchema } } | undefined;
  let content = text;
  if (format?.type === "json_object") content = JSON.stringify({ reply: text });
  else if (format?.type === "json_schema") content = JSON.stringify(sampleFromSchema(format.json_schema?.schema ?? { type: "object", properties: { reply: { type: "string" } } }, text));

  let finishReason: ChatPlan["finishReason"] = "stop";
  const stops = typeof body.stop === "string" ? [body.stop] : Array.isArray(body.stop) ? body.stop : [];
  let cut = -1;
  for (const s of stops) {
    if (typeof s !== "string" || !s) continue;
    const at = content.indexOf(s);
    if (at >= 0 && (cut < 0 || at < cut)) cut = at;
  }
  if (cut >= 0) content = content.slice(0, cut);

  const max = positiveInt(body.max_completion_tokens) ?? positiveInt(body.max_tokens);
  if (max !== undefined) {
    const w = words(content);
    if (w.length > max) {
      content = w.slice(0, max).join(" ");
      finishReason = "length";
    }
  }

  return {
    content,
    toolCall: null,
    finishReason,
    n,
    promptTokens: prompt,
    completionTokens: countWords(content) * n,
    cachedTokens: cached,
  };
}

export function usageObject(plan: ChatPlan) {
  return {
    prompt_tokens: plan.promptTokens,
    completion_tokens: plan.completionTokens,
    total_tokens: plan.promptTokens + plan.completionTokens,
    prompt_tokens_details: { cached_tokens: plan.cachedTokens, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

/** The `chat.completion` object (non-streaming response). */
export function completionBody(plan: ChatPlan, id: string, model: string, created: number): string {
  const message = plan.toolCall
    ? {
        role: "assistant",
        content: null,
        tool_calls: [{ id: plan.toolCall.id, type: "function", function: { name: plan.toolCall.name, arguments: plan.toolCall.arguments } }],
        refusal: null,
        annotations: [],
      }
    : { role: "assistant", content: plan.content, refusal: null, annotations: [] };
  const choices = [];
  for (let i = 0; i < plan.n; i++) choices.push({ index: i, message, logprobs: null, finish_reason: plan.finishReason });
  return JSON.stringify({
    id,
    object: "chat.completion",
    created,
    model,
    choices,
    usage: usageObject(plan),
    service_tier: "default",
    system_fingerprint: "fp_stub",
  });
}

/**
 * The SSE events of a streamed answer, each a complete "data: …\n\n" string, ending with
 * "data: [DONE]\n\n". Content is sent one word (with its leading whitespace) per chunk; tool-call arguments in 6-char pieces.
 * With include_usage every chunk carries "usage": null and a last chunk has empty choices and
 * the usage, like OpenAI.
 */
export function streamEvents(plan: ChatPlan, id: string, model: string, created: number, includeUsage: boolean): string[] {
  const head = `{"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"service_tier":"default","system_fingerprint":"fp_stub","choices":`;
  const tail = includeUsage ? `,"usage":null}` : "}";
  const events: string[] = [];
  const emit = (deltas: string, finish: string | null) => {
    for (let i = 0; i < plan.n; i++) {
      events.push(`data: ${head}[{"index":${i},"delta":${deltas},"logprobs":null,"finish_reason":${finish === null ? "null" : JSON.stringify(finish)}}]${tail}\n\n`);
    }
  };

  if (plan.toolCall) {
    const tc = plan.toolCall;
    emit(
      JSON.stringify({
        role: "assistant",
        content: null,
        tool_calls: [{ index: 0, id: tc.id, type: "function", function: { name: tc.name, arguments: "" } }],
        refusal: null,
      }),
      null,
    );
    for (let at = 0; at < tc.arguments.length; at += 6) {
      emit(JSON.stringify({ tool_calls: [{ index: 0, function: { arguments: tc.arguments.slice(at, at + 6) } }] }), null);
    }
  } else {
    emit(`{"role":"assistant","content":"","refusal":null}`, null);
    // one word per chunk, with its leading whitespace, so the chunks concatenate to the content
    const content = plan.content ?? "";
    const pieces: string[] = content.match(/\s*\S+/g) ?? [];
    let used = 0;
    for (const p of pieces) used += p.length;
    if (used < content.length) {
      if (pieces.length) pieces[pieces.length - 1] += content.slice(used);
      else pieces.push(content);
    }
    for (const p of pieces) emit(`{"content":${JSON.stringify(p)}}`, null);
  }
  emit("{}", plan.finishReason);
  if (includeUsage) events.push(`data: ${head}[],"usage":${JSON.stringify(usageObject(plan))}}\n\n`);
  events.push("data: [DONE]\n\n");
  return events;
}
