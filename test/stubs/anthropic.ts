// A stub upstream that speaks Anthropic's real Messages API over HTTP, for tests.
//
//   const stub = await startAnthropicStub();      // stub.url = http://127.0.0.1:<port>/v1
//   new Anthropic({ baseURL: stub.origin, apiKey: stub.apiKey })
//   stub.requests → every request: { method, path, headers (lowercased), body }
//
// Auth: `x-api-key: <apiKey>` (default "sk-ant-stub") or `Authorization: Bearer <apiKey>` (what
// the official SDK sends), else 401 in Anthropic's error shape
// {"type":"error","error":{"type":"authentication_error","message":…}}; the `anthropic-version`
// header is required (400 otherwise), like the real API.
// Routes:
//   POST /v1/messages               JSON, or SSE with `stream: true` (message_start,
//                                   content_block_start/delta/stop, ping, message_delta with
//                                   usage, message_stop)
//   POST /v1/messages/count_tokens  {input_tokens}
//   GET  /v1/models                 {data: [{type: "model", id, display_name, created_at}], …}
//
// Deterministic answers (what tests can compute), words(s) = whitespace-separated words:
//   input_tokens  = words(system) + Σ messages (3 + words of its text, tool_result contents and
//                   JSON of tool_use inputs) + 100 per image
//   output_tokens = words of the reply text, or words of the tool input's JSON
//   reply: tools given, tool_choice not "none", last user turn has no tool_result → one
//          tool_use (the tool_choice's tool, else the first) with input {<first string
//          property or "query">: <last user text>}, stop_reason "tool_use"; id "toolu_stub_<n>";
//          a last user turn with a tool_result → "Tool result received: <its words>";
//          otherwise "Hello from anthropic stub: <last user text>", plus " [image: <media
//          type>]" for each image of that turn
//   stop_sequences cut the reply before the earliest one (stop_reason "stop_sequence"),
//   max_tokens cuts it to its first N words (stop_reason "max_tokens").
// Failure triggers by model: "claude-500" → 500 api_error, "claude-529" → 529 overloaded_error.
// Whole-stub faults (stub.setFault), for routing tests: every POST /v1/messages… then (for
// `times` requests, default all) answers `status` in Anthropic's error shape, or closes the
// connection without answering (`drop`), or — streams only — sends message_start and then
// destroys the connection (`breakStream`) or stays silent (`stallStream`); `faulted` counts them.
// "claude-slow-stream" streams "w1 w2 … w20", one text delta every opts.slowMs (for aborts);
// `disconnects` counts streams whose client went away before the end.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readJsonBody } from "./http.ts";

export type AnthropicStubOptions = {
  apiKey?: string;
  /** Interval between the 20 text deltas of model "claude-slow-stream". Default 50 ms. */
  slowMs?: number;
};

export type AnthropicRequest = { method: string; path: string; headers: IncomingHttpHeaders; body: any };

export type AnthropicStub = {
  /** Base URL with /v1 (what citygate's provider slot takes). */
  url: string;
  /** Without /v1 (what the Anthropic SDK takes as baseURL). */
  origin: string;
  apiKey: string;
  requests: AnthropicRequest[];
  /** Messages calls (plain, streamed and count_tokens) received. */
  readonly messageCalls: number;
  /** Streams whose client went away before the end. */
  readonly disconnects: number;
  /** Makes every POST /v1/messages… fail in a chosen way (null: healthy again). */
  setFault(f: AnthropicFault | null): void;
  /** Requests that got the fault. */
  readonly faulted: number;
  close(): Promise<void>;
};

export type AnthropicFault = { status?: number; drop?: boolean; breakStream?: boolean; stallStream?: boolean; times?: number };

const FAULT_TYPES: Record<number, string> = { 400: "invalid_request_error", 429: "rate_limit_error", 500: "api_error", 503: "overloaded_error", 529: "overloaded_error" };

const IMAGE_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp"];

const words = (s: string) => s.split(/\s+/).filter(Boolean);

function error(status: number, type: string, message: string) {
  return { status, body: { type: "error", error: { type, message } } };
}

type Block = { type: string; [k: string]: any };
type Msg = { role: string; content: string | Block[] };

function blocksOf(m: Msg): Block[] {
  return typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
}

function toolResultText(b: Block): string {
  if (typeof b.content === "string") return b.content;
  if (Array.isArray(b.content)) return b.content.filter((c: Block) => c?.type === "text").map((c: Block) => c.text).join(" ");
  return "";
}

/** Validates a messages request; returns an error message or null. */
function validate(body: any, countOnly: boolean): string | null {
  if (typeof body?.model !== "string" || !body.model) return "model: Field required";
  if (!countOnly && !(Number.isInteger(body.max_tokens) && body.max_tokens > 0)) return "max_tokens: Field required";
  if (!Array.isArray(body.messages) || body.messages.length === 0) return "messages: at least one message is required";
  if (body.system !== undefined && typeof body.system !== "string" && !(Array.isArray(body.system) && body.system.every((b: Block) => b?.type === "text" && typeof b.text === "string"))) {
    return "system: Input should be a valid string or a list of text blocks";
  }
  let prevToolUses = new Set<string>();
  for (let i = 0; i < body.messages.length; i++) {
    const m = body.messages[i];
    if (m?.role !== "user" && m?.role !== "assistant") return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    if (typeof m.content !== "string" && !Array.isArray(m.content)) return `messages.${i}.content: Input should be a valid string or list`;
    const uses = new Set<string>();
    for (const [j, b] of blocksOf(m).entries()) {
      const at = `messages.${i}.content.${j}`;
      switch (b?.type) {
        case "text":
          if (typeof b.text !== "string") return `${at}.text: Field required`;
          break;
        case "image": {
          const s = b.source;
          if (s?.type === "base64") {
            if (!IMAGE_TYPES.includes(s.media_type)) return `${at}.source.media_type: Input should be ${IMAGE_TYPES.map((t) => `'${t}'`).join(", ")}`;
            if (typeof s.data !== "string" || !/^[A-Za-z0-9+/]+=*$/.test(s.data)) return `${at}.source.data: invalid base64 data`;
          } else if (s?.type === "url") {
            if (typeof s.url !== "string" || !/^https?:\/\//.test(s.url)) return `${at}.source.url: invalid url`;
          } else return `${at}.source: Input tag '${s?.type}' found using 'type' does not match any of the expected tags: 'base64', 'url'`;
          if (m.role !== "user") return `${at}: images are only allowed in user messages`;
          break;
        }
        case "tool_use":
          if (m.role !== "assistant") return `${at}: tool_use blocks are only allowed in assistant messages`;
          if (typeof b.id !== "string" || typeof b.name !== "string" || typeof b.input !== "object") return `${at}: tool_use needs id, name and input`;
          uses.add(b.id);
          break;
        case "tool_result":
          if (m.role !== "user") return `${at}: tool_result blocks are only allowed in user messages`;
          if (!prevToolUses.has(b.tool_use_id)) return `${at}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${b.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
          break;
        case "thinking":
        case "redacted_thinking":
        case "document":
          break;
        default:
          return `${at}.type: Input tag '${b?.type}' found using 'type' does not match any of the expected tags`;
      }
    }
    prevToolUses = uses;
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) return "tools: Input should be a valid list";
    for (const [i, t] of body.tools.entries()) {
      if (typeof t?.name !== "string") return `tools.${i}.name: Field required`;
      if ((t.type === undefined || t.type === "custom") && typeof t.input_schema !== "object") return `tools.${i}.input_schema: Field required`;
    }
  }
  if (body.stop_sequences !== undefined && !(Array.isArray(body.stop_sequences) && body.stop_sequences.every((s: unknown) => typeof s === "string"))) {
    return "stop_sequences: Input should be a valid list of strings";
  }
  return null;
}

export function inputTokens(body: any): number {
  const system = typeof body.system === "string" ? body.system : Array.isArray(body.system) ? body.system.map((b: Block) => b.text).join(" ") : "";
  let n = words(system).length;
  for (const m of body.messages as Msg[]) {
    n += 3;
    for (const b of blocksOf(m)) {
      if (b.type === "text") n += words(b.text).length;
      else if (b.type === "tool_result") n += words(toolResultText(b)).length;
      else if (b.type === "tool_use") n += words(JSON.stringify(b.input)).length;
      else if (b.type === "image") n += 100;
    }
  }
  return n;
}

type Plan = { content: Block[]; stop_reason: string; stop_sequence: string | null; output: number };

function plan(body: any, seq: number): Plan {
  const msgs = body.messages as Msg[];
  const last = msgs[msgs.length - 1];
  const lastBlocks = last.role === "user" ? blocksOf(last) : [];
  const lastText = words(lastBlocks.filter((b) => b.type === "text").map((b) => b.text).join(" ")).join(" ");
  const results = lastBlocks.filter((b) => b.type === "tool_result");
  const tools = Array.isArray(body.tools) ? body.tools : [];
  const choice = body.tool_choice?.type;
  if (tools.length && choice !== "none" && last.role === "user" && results.length === 0) {
    const tool = (choice === "tool" && tools.find((t: any) => t.name === body.tool_choice.name)) || tools[0];
    const props = tool.input_schema?.properties ?? {};
    const key = Object.keys(props).find((k) => props[k]?.type === undefined || props[k]?.type === "string") ?? "query";
    const input = { [key]: lastText };
    return { content: [{ type: "tool_use", id: `toolu_stub_${seq}`, name: tool.name, input }], stop_reason: "tool_use", stop_sequence: null, output: words(JSON.stringify(input)).length };
  }
  let text: string;
  if (results.length) text = "Tool result received: " + words(results.map(toolResultText).join(" ")).join(" ");
  else {
    text = lastText ? `Hello from anthropic stub: ${lastText}` : "Hello from anthropic stub:";
    for (const b of lastBlocks) if (b.type === "image") text += ` [image: ${b.source.type === "base64" ? b.source.media_type : "url"}]`;
  }
  let stop_reason = "end_turn";
  let stop_sequence: string | null = null;
  let cut = -1;
  for (const s of body.stop_sequences ?? []) {
    const at = s ? text.indexOf(s) : -1;
    if (at >= 0 && (cut < 0 || at < cut)) {
      cut = at;
      stop_sequence = s;
    }
  }
  if (cut >= 0) {
    text = text.slice(0, cut);
    stop_reason = "stop_sequence";
  }
  const w = words(text);
  if (w.length > body.max_tokens) {
    text = w.slice(0, body.max_tokens).join(" ");
    stop_reason = "max_tokens";
    stop_sequence = null;
  }
  return { content: [{ type: "text", text }], stop_reason, stop_sequence, output: words(text).length };
}

function sse(res: ServerResponse, type: string, data: object) {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

export async function startAnthropicStub(opts: AnthropicStubOptions = {}): Promise<AnthropicStub> {
  const apiKey = opts.apiKey ?? "sk-ant-stub";
  const requests: AnthropicRequest[] = [];
  let seq = 0;
  let messageCalls = 0;
  let disconnects = 0;
  let fault: AnthropicFault | null = null;
  let faulted = 0;
  const slowMs = opts.slowMs ?? 50;

  const server = createServer(async (req, res) => {
    const { body, badJson } = await readJsonBody(req);
    const n = ++seq;
    const path = (req.url ?? "/").split("?")[0];
    requests.push({ method: req.method ?? "GET", path, headers: req.headers, body });
    const send = (status: number, payload: object) => {
      const text = JSON.stringify(payload);
      res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "request-id": `req_stub${n}` });
      res.end(text);
    };
    const fail = (e: ReturnType<typeof error>) => send(e.status, e.body);

    if (fault && req.method === "POST" && path.startsWith("/v1/messages") && (fault.times === undefined || fault.times > 0)) {
      if (fault.times !== undefined) fault.times--;
      faulted++;
      if (fault.drop) return void req.socket.destroy();
      if ((fault.breakStream || fault.stallStream) && body?.stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
        const usage = { input_tokens: inputTokens(body), output_tokens: 1 };
        sse(res, "message_start", { message: { id: `msg_stub${n}`, type: "message", role: "assistant", model: body.model, content: [], stop_reason: null, stop_sequence: null, usage } });
        sse(res, "content_block_start", { index: 0, content_block: { type: "text", text: "" } });
        sse(res, "content_block_delta", { index: 0, delta: { type: "text_delta", text: "Hello" } });
        if (fault.stallStream) return void req.socket.once("close", () => res.destroy()); // silent until the client leaves
        setTimeout(() => res.destroy(), 50);
        return;
      }
      const st = fault.status ?? 500;
      return fail(error(st, FAULT_TYPES[st] ?? "api_error", `stub fault ${st}`));
    }

    // The API key as x-api-key (the AI SDK, curl) or as a bearer token (the official SDK).
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    const key = req.headers["x-api-key"] ?? bearer;
    if (!key) return fail(error(401, "authentication_error", "x-api-key header is required"));
    if (key !== apiKey) return fail(error(401, "authentication_error", "invalid x-api-key"));
    if (!req.headers["anthropic-version"]) return fail(error(400, "invalid_request_error", "anthropic-version: header is required"));

    if (req.method === "GET" && path === "/v1/models") {
      const data = ["claude-sonnet-4-5", "claude-haiku-4-5"].map((id) => ({ type: "model", id, display_name: id, created_at: "2025-09-29T00:00:00Z" }));
      return send(200, { data, has_more: false, first_id: data[0].id, last_id: data.at(-1)!.id });
    }
    if (req.method !== "POST" || (path !== "/v1/messages" && path !== "/v1/messages/count_tokens")) {
      return fail(error(404, "not_found_error", `Not found: ${req.method} ${path}`));
    }
    if (badJson) return fail(error(400, "invalid_request_error", "There was an issue with your request body: invalid JSON"));
    messageCalls++;
    const countOnly = path.endsWith("/count_tokens");
    const bad = validate(body, countOnly);
    if (bad) return fail(error(400, "invalid_request_error", bad));
    if (body.model === "claude-500") return fail(error(500, "api_error", "Internal server error"));
    if (body.model === "claude-529") return fail(error(529, "overloaded_error", "Overloaded"));
    const input = inputTokens(body);
    if (countOnly) return send(200, { input_tokens: input });

    const p = plan(body, n);
    const slow = body.model === "claude-slow-stream";
    if (slow) {
      const text = Array.from({ length: 20 }, (_, i) => `w${i + 1}`).join(" ");
      p.content = [{ type: "text", text }];
      p.output = 20;
      p.stop_reason = "end_turn";
    }
    const id = `msg_stub${n}`;
    const usage = { input_tokens: input, output_tokens: p.output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, service_tier: "standard" };
    if (body.stream !== true) {
      return send(200, { id, type: "message", role: "assistant", model: body.model, content: p.content, stop_reason: p.stop_reason, stop_sequence: p.stop_sequence, usage });
    }
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "request-id": `req_stub${n}` });
    sse(res, "message_start", {
      message: { id, type: "message", role: "assistant", model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
    });
    if (slow) {
      sse(res, "content_block_start", { index: 0, content_block: { type: "text", text: "" } });
      for (const piece of (p.content[0].text as string).match(/\s*\S+/g) ?? []) {
        await new Promise((r) => setTimeout(r, slowMs));
        if (res.destroyed) {
          disconnects++;
          return;
        }
        sse(res, "content_block_delta", { index: 0, delta: { type: "text_delta", text: piece } });
      }
      sse(res, "content_block_stop", { index: 0 });
    }
    if (!slow) p.content.forEach((b, index) => {
      if (b.type === "text") {
        sse(res, "content_block_start", { index, content_block: { type: "text", text: "" } });
        if (index === 0) sse(res, "ping", {});
        for (const piece of b.text.match(/\s*\S+/g) ?? []) sse(res, "content_block_delta", { index, delta: { type: "text_delta", text: piece } });
      } else {
        sse(res, "content_block_start", { index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } });
        const json = JSON.stringify(b.input);
        for (let at = 0; at < json.length; at += 8) sse(res, "content_block_delta", { index, delta: { type: "input_json_delta", partial_json: json.slice(at, at + 8) } });
      }
      sse(res, "content_block_stop", { index });
    });
    sse(res, "message_delta", { delta: { stop_reason: p.stop_reason, stop_sequence: p.stop_sequence }, usage: { output_tokens: p.output } });
    sse(res, "message_stop", {});
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/v1`,
    origin,
    apiKey,
    requests,
    get messageCalls() {
      return messageCalls;
    },
    get disconnects() {
      return disconnects;
    },
    setFault(f) {
      fault = f ? { ...f } : null;
    },
    get faulted() {
      return faulted;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
