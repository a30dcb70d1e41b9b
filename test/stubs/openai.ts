// A stub upstream that speaks OpenAI's real HTTP API, for tests and benchmarks.
//
//   const stub = await startOpenAIStub();          // http://127.0.0.1:<ephemeral>/v1
//   new OpenAI({ baseURL: stub.url, apiKey: "sk-stub" })
//   stub.requests  → every request: { method, path, query, headers (lowercased), body }
//   stub.disconnects → requests whose client went away before the response finished
//   stub.reset(); await stub.close();
//
// Every /v1 route needs `Authorization: Bearer <opts.apiKey>` (default "sk-stub"), else 401
// in OpenAI's error shape. Routes:
//   POST /v1/chat/completions          JSON or SSE (stream: true); tools; response_format
//   POST /v1/embeddings                input: string | string[] | token array | token arrays;
//                                      encoding_format float (default) | base64 (little-endian
//                                      float32); dimensions (text-embedding-3-* only; default
//                                      1536, 3072 for -large); deterministic unit vectors;
//                                      usage.prompt_tokens = Σ words(string) or token-array length
//   POST /v1/responses                 only with opts.responsesApi (and /v1/responses/compact, and
//                                      compaction_trigger items: one compaction item "oa-cmp:…"): the Responses API, JSON or
//                                      SSE (typed events, sequence_number, response.completed
//                                      with usage); input, instructions, function tools and
//                                      function_call / function_call_output items are mapped to
//                                      the chat rules below (same replies, same token counts)
//   GET  /v1/models, /v1/models/{id}
//   POST /v1/images/generations        b64_json (default) or url (response_format "url", and
//                                      the default for dall-e-*) → GET /files/images/{name}.png
//                                      (no auth, like OpenAI's signed URLs); one 2x2 PNG per image;
//                                      gpt-image-* add usage { input_tokens: words(prompt),
//                                      output_tokens: 100 × n }
//   POST /v1/audio/speech              mp3 (default) | wav | opus | aac | flac | pcm, playable bytes
//   POST /v1/audio/transcriptions      multipart; json → { text: "stub transcript of <N> bytes",
//   POST /v1/audio/translations        usage }; text | srt | vtt | verbose_json; duration =
//                                      N / 32000 s (16 kHz 16-bit mono), rounded to 2 decimals
//   POST /v1/videos                    JSON or multipart → video object, status "queued"
//   GET  /v1/videos, /v1/videos/{id}   each retrieve advances: after k retrieves the status is
//                                      "in_progress" (k < opts.videoPolls) or "completed"
//                                      (k ≥ videoPolls, default 2); model "stub-video-fail" ends "failed"
//   GET  /v1/videos/{id}/content       MP4 (variant=thumbnail|spritesheet: the PNG); 400
//                                      code "video_not_ready" before completion
//   DELETE /v1/videos/{id}
//
// Failure triggers, by the request's `model` (any POST route above):
//   stub-500          → 500 server_error
//   stub-429          → 429 rate_limit_exceeded (x-ratelimit-* headers)
//   stub-400          → 400 context_length_exceeded (so does a chat prompt containing
//                       TRIGGER_CONTEXT_LENGTH)
//   stub-slow         → answers normally after opts.slowMs (default 3000 ms)
//   stub-no-usage     → chat: answers normally but reports no usage (no `usage` in the JSON,
//                       no usage event in a stream even with include_usage), like some
//                       OpenAI-compatible servers
//   stub-no-duration  → transcriptions: json without `usage`, verbose_json without `duration`
//                       (an upstream that reports no audio length)
//   stub-stream-slow  → chat: streams one chunk every opts.streamSlowMs (200 ms) for
//                       opts.streamSlowChunks (20) content chunks "w1 w2 … w20"; without
//                       stream: the same reply as JSON after chunks × streamSlowMs
//
// Whole-stub faults (stub.setFault), for routing tests with several stubs: every POST to /v1
// then (for `times` requests, default all) answers `status` (OpenAI's error shape, with a
// Retry-After when `retryAfter` is set), or hangs until the client goes away (`hang`), or
// closes the connection without a word (`drop`), or —
// chat streams only — sends its first event and then destroys the connection (`breakStream`)
// or stays silent until the client goes away (`stallStream`).
// Chat reply text and token counts: see openai-chat.ts (prompt_tokens = Σ (words + 3)).
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  allMessagesContain,
  completionBody,
  countWords,
  planChat,
  promptTokens,
  streamEvents,
  type ChatMessage,
  type ChatRequest,
} from "./openai-chat.ts";
import {
  contextLengthExceeded,
  invalidJson,
  invalidUrl,
  invalidValue,
  missingKey,
  missingParam,
  notFound,
  openaiError,
  rateLimited,
  serverError,
  wrongKey,
  type StubError,
} from "./openai-errors.ts";
import { MP4_BYTES, PNG_BYTES, SPEECH_FORMATS } from "./openai-media.ts";
import { unitVector } from "./vector.ts";

export type OpenAIStubOptions = {
  /** The key clients must send as `Authorization: Bearer <apiKey>`. Default "sk-stub". */
  apiKey?: string;
  /** Default "127.0.0.1". */
  host?: string;
  /** Default 0 (ephemeral). */
  port?: number;
  /** Delay of model "stub-slow". Default 3000 ms. */
  slowMs?: number;
  /** Interval between chunks of model "stub-stream-slow". Default 200 ms. */
  streamSlowMs?: number;
  /** Content chunks of model "stub-stream-slow". Default 20. */
  streamSlowChunks?: number;
  /** Retrieves after which a video is "completed". Default 2. */
  videoPolls?: number;
  /** Record requests in `requests`. Default true; benchmarks turn it off. */
  record?: boolean;
  /** Serve POST /v1/responses too (like OpenAI itself). Default false: an OpenAI-compatible
   *  API that only has chat/completions (and embeddings) answers it 404. */
  responsesApi?: boolean;
};

export type StubFault = {
  status?: number;
  retryAfter?: string;
  hang?: boolean;
  /** Close the connection without answering (a dropped connection). */
  drop?: boolean;
  breakStream?: boolean;
  /** Chat streams only: sends the first event and then nothing, until the client goes away. */
  stallStream?: boolean;
  /** How many requests get the fault (default: all until cleared). */
  times?: number;
  /** The error message of a `status` fault (default "stub fault <status>"). */
  message?: string;
};

export type RecordedRequest = {
  method: string;
  /** Path without the query string, e.g. "/v1/chat/completions". */
  path: string;
  /** The query string including "?", or "". */
  query: string;
  /** Node's header object: names lowercased. */
  headers: IncomingHttpHeaders;
  /**
   * Parsed JSON; for multipart a plain object of fields (files as { filename, type, size },
   * repeated fields as arrays); undefined when there is no body; the raw text otherwise.
   */
  body: unknown;
  /** Whether the whole answer went out: false while it is pending, and for good when the
   *  caller went away first (a killed gateway's request). */
  answered: () => boolean;
};

export type OpenAIStub = {
  /** Base URL a client uses, e.g. "http://127.0.0.1:1234/v1". */
  url: string;
  /** e.g. "http://127.0.0.1:1234". */
  origin: string;
  port: number;
  requests: RecordedRequest[];
  /** Requests whose client went away before the response finished. */
  readonly disconnects: number;
  /** Requests received since start or reset (counted even when record is false). */
  readonly requestCount: number;
  /** Clears requests, counters, ids and videos. */
  reset(): void;
  /** Makes every POST fail in a chosen way (null: healthy again). */
  setFault(f: StubFault | null): void;
  /** Requests that got the fault. */
  readonly faulted: number;
  close(): Promise<void>;
};

type Video = {
  id: string;
  object: "video";
  model: string;
  status: "queued" | "in_progress" | "completed" | "failed";
  progress: number;
  created_at: number;
  completed_at: number | null;
  expires_at: number | null;
  error: { code: string; message: string } | null;
  prompt: string | null;
  remixed_from_video_id: string | null;
  seconds: string;
  size: string;
};

type VideoJob = { video: Video; polls: number };

type Ctx = {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  path: string;
  query: string;
  seq: number;
  raw: Buffer;
};

const MODELS = [
  "gpt-4o-mini",
  "text-embedding-3-small",
  "text-embedding-3-large",
  "gpt-4o",
  "gpt-4.1-mini",
  "gpt-image-1",
  "dall-e-3",
  "tts-1",
  "gpt-4o-mini-tts",
  "whisper-1",
  "gpt-4o-transcribe",
  "sora-2",
  "stub-500",
  "stub-429",
  "stub-400",
  "stub-slow",
  "stub-stream-slow",
  "stub-no-usage",
  "stub-no-duration",
  "stub-video-fail",
];
const MODELS_CREATED = 1_700_000_000;
const EMPTY = Buffer.alloc(0);

function sendRaw(res: ServerResponse, status: number, contentType: string, body: string | Buffer, seq: number, extra?: Record<string, string>): void {
  if (res.destroyed) return;
  const headers: Record<string, string | number> = {
    "content-type": contentType,
    "content-length": typeof body === "string" ? Buffer.byteLength(body) : body.length,
    "x-request-id": `req_stub${seq}`,
    "openai-processing-ms": "1",
  };
  if (extra) Object.assign(headers, extra);
  res.writeHead(status, headers);
  res.end(body);
}

function sendJson(ctx: Ctx, status: number, body: string): void {
  sendRaw(ctx.res, status, "application/json", body, ctx.seq);
}

function sendError(ctx: Ctx, err: StubError): void {
  sendRaw(ctx.res, err.status, "application/json", err.body, ctx.seq, err.headers);
}

/** Resolves true after ms, or false as soon as the client goes away. */
function wait(res: ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (res.destroyed) return resolve(false);
    const onClose = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      res.off("close", onClose);
      resolve(!res.destroyed);
    }, ms);
    res.once("close", onClose);
  });
}

function failureFor(model: unknown): StubError | undefined {
  switch (model) {
    case "stub-500":
      return serverError();
    case "stub-429":
      return rateLimited("stub-429");
    case "stub-400":
      return contextLengthExceeded(0);
    default:
      return undefined;
  }
}

async function parseMultipart(raw: Buffer, contentType: string): Promise<Record<string, unknown>> {
  const form = await new Request("http://stub.invalid/", { method: "POST", headers: { "content-type": contentType }, body: new Uint8Array(raw.buffer, raw.byteOffset, raw.length) as Uint8Array<ArrayBuffer> }).formData();
  const out: Record<string, unknown> = {};
  for (const [key, value] of form) {
    const v = typeof value === "string" ? value : { filename: value.name, type: value.type, size: value.size };
    const prev = out[key];
    out[key] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

function fmtTimestamp(seconds: number, sep: "," | "."): string {
  const ms = Math.round(seconds * 1000);
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  const r = ms % 1000;
  return `${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}:${String(s).padStart(2, "0")}${sep}${String(r).padStart(3, "0")}`;
}

export async function startOpenAIStub(opts: OpenAIStubOptions = {}): Promise<OpenAIStub> {
  const apiKey = opts.apiKey ?? "sk-stub";
  const expectedAuth = `Bearer ${apiKey}`;
  const slowMs = opts.slowMs ?? 3000;
  const streamSlowMs = opts.streamSlowMs ?? 200;
  const streamSlowChunks = opts.streamSlowChunks ?? 20;
  const videoPolls = opts.videoPolls ?? 2;
  const record = opts.record ?? true;

  const requests: RecordedRequest[] = [];
  const videos = new Map<string, VideoJob>();
  let seq = 0;
  let disconnects = 0;
  let fault: StubFault | null = null;
  let faulted = 0;
  let origin = "";

  function onResponseClose(this: ServerResponse): void {
    if (!this.writableFinished) disconnects++;
  }

  // ---- chat ----------------------------------------------------------------------------
  async function chatCompletions(ctx: Ctx, body: ChatRequest): Promise<void> {
    if (typeof body.model !== "string" || !body.model) {
      return sendError(ctx, openaiError(400, "you must provide a model parameter", "invalid_request_error"));
    }
    if (!Array.isArray(body.messages)) return sendError(ctx, missingParam("messages"));
    const messages = body.messages as ChatMessage[];
    if (messages.length === 0) {
      return sendError(ctx, openaiError(400, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", "invalid_request_error", "messages", "empty_array"));
    }
    const stream = body.stream === true;
    if (body.stream_options != null && !stream) {
      return sendError(ctx, invalidValue("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled."));
    }
    const model = body.model;
    const failure = failureFor(model);
    if (failure) return sendError(ctx, model === "stub-400" ? contextLengthExceeded(promptTokens(messages)) : failure);
    if (allMessagesContain(messages, "TRIGGER_CONTEXT_LENGTH")) return sendError(ctx, contextLengthExceeded(promptTokens(messages)));

    const slowStream = model === "stub-stream-slow";
    if (model === "stub-slow" && !(await wait(ctx.res, slowMs))) return;
    if (slowStream && !stream && !(await wait(ctx.res, streamSlowMs * streamSlowChunks))) return;

    const plan = planChat(body, messages, ctx.seq, slowStream ? streamSlowChunks : undefined);
    const id = `chatcmpl-stub${ctx.seq}`;
    const created = Math.floor(Date.now() / 1000);
    const noUsage = model === "stub-no-usage";
    if (!stream) {
      const json = completionBody(plan, id, model, created);
      if (!noUsage) return sendJson(ctx, 200, json);
      const { usage: _, ...rest } = JSON.parse(json);
      return sendJson(ctx, 200, JSON.stringify(rest));
    }

    const includeUsage = body.stream_options?.include_usage === true && !noUsage;
    const events = streamEvents(plan, id, model, created, includeUsage);
    const res = ctx.res;
    if (res.destroyed) return;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      "x-request-id": `req_stub${ctx.seq}`,
      "openai-processing-ms": "1",
    });
    if (!slowStream) {
      res.end(events.join(""));
      return;
    }
    // role chunk, then one content chunk every streamSlowMs, then the rest at once
    res.write(events[0]);
    for (let i = 1; i <= streamSlowChunks && i < events.length; i++) {
      if (!(await wait(res, streamSlowMs))) return;
      res.write(events[i]);
    }
    res.end(events.slice(streamSlowChunks + 1).join(""));
  }

  // ---- embeddings ----------------------------------------------------------------------
  function embeddings(ctx: Ctx, body: Record<string, unknown>): void {
    if (typeof body.model !== "string" || !body.model) return sendError(ctx, missingParam("model"));
    const input = body.input;
    const isTokens = (x: unknown): x is number[] => Array.isArray(x) && x.length > 0 && x.every((t) => Number.isInteger(t) && (t as number) >= 0);
    let items: (string | number[])[];
    if (typeof input === "string") items = [input];
    else if (isTokens(input)) items = [input];
    else if (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === "string" || isTokens(x))) items = input as (string | number[])[];
    else return sendError(ctx, invalidValue("input", "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."));
    if (items.some((x) => x === "")) return sendError(ctx, invalidValue("input", "'$.input' is invalid: empty strings are not allowed."));
    const format = body.encoding_format ?? "float";
    if (format !== "float" && format !== "base64") {
      return sendError(ctx, invalidValue("encoding_format", `Invalid value: '${String(format)}'. Supported values are: 'float' and 'base64'.`));
    }
    const full = body.model.endsWith("-large") ? 3072 : 1536;
    let dims = full;
    if (body.dimensions !== undefined) {
      if (!body.model.startsWith("text-embedding-3")) return sendError(ctx, invalidValue("dimensions", "This model does not support specifying dimensions."));
      if (!Number.isInteger(body.dimensions) || (body.dimensions as number) < 1 || (body.dimensions as number) > full) {
        return sendError(ctx, invalidValue("dimensions", `Invalid 'dimensions': expected an integer between 1 and ${full}.`));
      }
      dims = body.dimensions as number;
    }
    let prompt = 0;
    const data = items.map((x, index) => {
      prompt += typeof x === "string" ? countWords(x) : x.length;
      const v = stubVector(typeof x === "string" ? x : x.join(","), dims);
      const embedding = format === "base64" ? Buffer.from(new Float32Array(v).buffer).toString("base64") : v;
      return { object: "embedding", index, embedding };
    });
    sendJson(ctx, 200, JSON.stringify({ object: "list", data, model: body.model, usage: { prompt_tokens: prompt, total_tokens: prompt } }));
  }

  // ---- responses (only with opts.responsesApi) -------------------------------------------
  function responsesRoute(ctx: Ctx, body: Record<string, any>, compact = false): void {
    if (typeof body.model !== "string" || !body.model) return sendError(ctx, missingParam("model"));
    let compacting = false;
    const messages: ChatMessage[] = [];
    if (typeof body.instructions === "string") messages.push({ role: "system", content: body.instructions });
    const text = (c: unknown) => (typeof c === "string" ? c : Array.isArray(c) ? c.map((p: any) => p?.text ?? "").join(" ") : "");
    if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
    else if (Array.isArray(body.input)) {
      for (const item of body.input) {
        const type = item?.type ?? "message";
        if (type === "message") messages.push({ role: item.role === "developer" ? "system" : item.role, content: text(item.content) });
        else if (type === "function_call") messages.push({ role: "assistant", content: null, tool_calls: [{ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } }] });
        else if (type === "function_call_output") messages.push({ role: "tool", tool_call_id: item.call_id, content: text(item.output) });
        // OpenAI's own compaction items (only OpenAI reads them: the stub's are "oa-cmp:<summary>")
        else if (type === "compaction" && String(item.encrypted_content).startsWith("oa-cmp:")) messages.push({ role: "user", content: String(item.encrypted_content).slice(7) });
        else if (type === "compaction_trigger" && item === body.input.at(-1)) compacting = true;
        else return sendError(ctx, invalidValue("input", `Invalid input item type '${type}'.`));
      }
    } else return sendError(ctx, missingParam("input"));
    if (compacting || compact) {
      // OpenAI's compaction: one compaction item whose content only OpenAI reads
      const prompt = promptTokens(messages);
      const usage = { input_tokens: prompt, input_tokens_details: { cached_tokens: 0 }, output_tokens: 7, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: prompt + 7 };
      const summary = messages.filter((m) => m.role === "user").map((m) => m.content).join(" / ");
      const cmp = { type: "compaction", id: `cmp_stub${ctx.seq}`, encrypted_content: `oa-cmp:${summary}` };
      if (compact) {
        const kept = (Array.isArray(body.input) ? body.input : [{ role: "user", content: body.input }]).filter((i: any) => (i?.type ?? "message") === "message" && i.role === "user");
        return sendJson(ctx, 200, JSON.stringify({ id: `resp_stub${ctx.seq}`, object: "response.compaction", created_at: Math.floor(Date.now() / 1000), output: [...kept, cmp], usage }));
      }
      const done = { id: `resp_stub${ctx.seq}`, object: "response", created_at: 1, status: "completed", model: body.model, output: [cmp], usage, error: null, incomplete_details: null, tools: [], parallel_tool_calls: true };
      if (body.stream !== true) return sendJson(ctx, 200, JSON.stringify(done));
      let k = 0;
      const e = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: k++, ...data })}\n\n`;
      ctx.res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
      ctx.res.end(e("response.created", { response: { ...done, status: "in_progress", output: [], usage: null } }) + e("response.output_item.done", { output_index: 0, item: cmp }) + e("response.completed", { response: done }));
      return;
    }
    const tools = Array.isArray(body.tools) ? body.tools.filter((t: any) => t?.type === "function").map((t: any) => ({ type: "function", function: { name: t.name, parameters: t.parameters } })) : undefined;
    const toolChoice = body.tool_choice?.type === "function" ? { type: "function", function: { name: body.tool_choice.name } } : body.tool_choice;
    const plan = planChat({ model: body.model, messages, tools, tool_choice: toolChoice, max_tokens: body.max_output_tokens }, messages, ctx.seq);
    const id = `resp_stub${ctx.seq}`;
    const usage = { input_tokens: plan.promptTokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: plan.completionTokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: plan.promptTokens + plan.completionTokens };
    const item = plan.toolCall
      ? { type: "function_call", id: `fc_stub${ctx.seq}`, call_id: plan.toolCall.id, name: plan.toolCall.name, arguments: plan.toolCall.arguments, status: "completed" }
      : { type: "message", id: `msg_stub${ctx.seq}`, status: "completed", role: "assistant", content: [{ type: "output_text", text: plan.content ?? "", annotations: [], logprobs: [] }] };
    const status = plan.finishReason === "length" ? "incomplete" : "completed";
    const response = (st: string, output: unknown[], u: unknown) => ({
      id, object: "response", created_at: Math.floor(Date.now() / 1000), status: st, error: null,
      incomplete_details: st === "incomplete" ? { reason: "max_output_tokens" } : null, instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null, model: body.model, output, parallel_tool_calls: true, previous_response_id: null,
      store: body.store ?? true, temperature: 1, text: { format: { type: "text" } }, tool_choice: body.tool_choice ?? "auto", tools: body.tools ?? [],
      top_p: 1, truncation: "disabled", usage: u, metadata: {},
    });
    if (body.stream !== true) return sendJson(ctx, 200, JSON.stringify(response(status, [item], usage)));
    let n = 0;
    const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n++, ...data })}\n\n`;
    const out = [ev("response.created", { response: response("in_progress", [], null) }), ev("response.in_progress", { response: response("in_progress", [], null) })];
    if (item.type === "function_call") {
      out.push(ev("response.output_item.added", { output_index: 0, item: { ...item, arguments: "", status: "in_progress" } }));
      out.push(ev("response.function_call_arguments.delta", { item_id: item.id, output_index: 0, delta: item.arguments }));
      out.push(ev("response.function_call_arguments.done", { item_id: item.id, output_index: 0, arguments: item.arguments }));
    } else {
      const t = (item as any).content[0].text as string;
      out.push(ev("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", content: [] } }));
      out.push(ev("response.content_part.added", { item_id: item.id, output_index: 0, content_index: 0, part: { type: "output_text", text: "", annotations: [] } }));
      for (const piece of t.match(/\s*\S+/g) ?? []) out.push(ev("response.output_text.delta", { item_id: item.id, output_index: 0, content_index: 0, delta: piece, logprobs: [] }));
      out.push(ev("response.output_text.done", { item_id: item.id, output_index: 0, content_index: 0, text: t, logprobs: [] }));
      out.push(ev("response.content_part.done", { item_id: item.id, output_index: 0, content_index: 0, part: (item as any).content[0] }));
    }
    out.push(ev("response.output_item.done", { output_index: 0, item }));
    out.push(ev(status === "completed" ? "response.completed" : "response.incomplete", { response: response(status, [item], usage) }));
    if (ctx.res.destroyed) return;
    ctx.res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-request-id": `req_stub${ctx.seq}` });
    ctx.res.end(out.join(""));
  }

  // ---- images --------------------------------------------------------------------------
  async function imagesGenerations(ctx: Ctx, body: Record<string, unknown>): Promise<void> {
    if (typeof body.prompt !== "string" || !body.prompt) return sendError(ctx, missingParam("prompt"));
    const model = typeof body.model === "string" ? body.model : "dall-e-2";
    const n = typeof body.n === "number" && Number.isInteger(body.n) ? body.n : 1;
    if (n < 1 || n > 10) return sendError(ctx, invalidValue("n", `Invalid 'n': integer above maximum value. Expected a value <= 10, but got ${n} instead.`));
    const format = body.response_format ?? (model.startsWith("dall-e") ? "url" : "b64_json");
    if (format !== "url" && format !== "b64_json") {
      return sendError(ctx, invalidValue("response_format", `Invalid value: '${String(format)}'. Supported values are: 'url' and 'b64_json'.`));
    }
    const data = [];
    for (let i = 0; i < n; i++) {
      const item: Record<string, string> =
        format === "url" ? { url: `${origin}/files/images/img_stub${ctx.seq}_${i}.png` } : { b64_json: PNG_BYTES.toString("base64") };
      if (model === "dall-e-3") item.revised_prompt = body.prompt;
      data.push(item);
    }
    const out: Record<string, unknown> = { created: Math.floor(Date.now() / 1000), data };
    if (model.startsWith("gpt-image")) {
      const input = countWords(body.prompt);
      out.background = "opaque";
      out.output_format = "png";
      out.quality = typeof body.quality === "string" ? body.quality : "low";
      out.size = typeof body.size === "string" ? body.size : "1024x1024";
      out.usage = {
        input_tokens: input,
        input_tokens_details: { text_tokens: input, image_tokens: 0 },
        output_tokens: 100 * n,
        total_tokens: input + 100 * n,
      };
    }
    sendJson(ctx, 200, JSON.stringify(out));
  }

  // ---- audio ---------------------------------------------------------------------------
  function speech(ctx: Ctx, body: Record<string, unknown>): void {
    if (typeof body.model !== "string") return sendError(ctx, missingParam("model"));
    if (typeof body.input !== "string") return sendError(ctx, missingParam("input"));
    if (typeof body.voice !== "string" && typeof body.voice !== "object") return sendError(ctx, missingParam("voice"));
    const format = typeof body.response_format === "string" ? body.response_format : "mp3";
    const out = SPEECH_FORMATS[format];
    if (!out) {
      return sendError(ctx, invalidValue("response_format", `Invalid value: '${format}'. Supported values are: 'mp3', 'opus', 'aac', 'flac', 'wav', and 'pcm'.`));
    }
    sendRaw(ctx.res, 200, out.contentType, out.bytes, ctx.seq);
  }

  function transcription(ctx: Ctx, form: Record<string, unknown>, task: "transcribe" | "translate"): void {
    const file = form.file as { size?: number } | undefined;
    if (!file || typeof file !== "object" || typeof file.size !== "number") return sendError(ctx, missingParam("file"));
    if (typeof form.model !== "string") return sendError(ctx, missingParam("model"));
    const size = file.size;
    const text = `stub transcript of ${size} bytes`;
    const duration = Math.round((size / 32000) * 100) / 100;
    const noDuration = form.model === "stub-no-duration";
    const usage = noDuration ? undefined : { type: "duration", seconds: Math.max(1, Math.ceil(duration)) };
    const format = typeof form.response_format === "string" ? form.response_format : "json";
    switch (format) {
      case "json":
        return sendJson(ctx, 200, JSON.stringify({ text, usage }));
      case "text":
        return sendRaw(ctx.res, 200, "text/plain; charset=utf-8", text + "\n", ctx.seq);
      case "srt":
        return sendRaw(ctx.res, 200, "text/plain; charset=utf-8", `1\n${fmtTimestamp(0, ",")} --> ${fmtTimestamp(duration, ",")}\n${text}\n\n`, ctx.seq);
      case "vtt":
        return sendRaw(ctx.res, 200, "text/plain; charset=utf-8", `WEBVTT\n\n${fmtTimestamp(0, ".")} --> ${fmtTimestamp(duration, ".")}\n${text}\n\n`, ctx.seq);
      case "verbose_json": {
        const language = task === "translate" ? "english" : typeof form.language === "string" ? form.language : "english";
        const segments = [
          {
            id: 0,
            seek: 0,
            start: 0,
            end: duration,
            text: " " + text,
            tokens: [50364, 50365, 50366],
            temperature: 0,
            avg_logprob: -0.2,
            compression_ratio: 1,
            no_speech_prob: 0,
          },
        ];
        return sendJson(ctx, 200, JSON.stringify({ task, language, duration: noDuration ? undefined : duration, text, segments, usage }));
      }
      default:
        return sendError(ctx, invalidValue("response_format", `Invalid value: '${format}'. Supported values are: 'json', 'text', 'srt', 'verbose_json', and 'vtt'.`));
    }
  }

  // ---- videos --------------------------------------------------------------------------
  function videoCreate(ctx: Ctx, body: Record<string, unknown>): void {
    if (typeof body.prompt !== "string" || !body.prompt) return sendError(ctx, missingParam("prompt"));
    const now = Math.floor(Date.now() / 1000);
    const video: Video = {
      id: `video_stub${ctx.seq}`,
      object: "video",
      model: typeof body.model === "string" ? body.model : "sora-2",
      status: "queued",
      progress: 0,
      created_at: now,
      completed_at: null,
      expires_at: null,
      error: null,
      prompt: body.prompt,
      remixed_from_video_id: null,
      seconds: body.seconds === undefined ? "4" : String(body.seconds),
      size: typeof body.size === "string" ? body.size : "720x1280",
    };
    const job = { video, polls: 0 };
    videos.set(video.id, job);
    if (videoPolls <= 0) advance(job);
    sendJson(ctx, 200, JSON.stringify(video));
  }

  function advance(job: VideoJob): void {
    const v = job.video;
    if (v.status === "completed" || v.status === "failed") return;
    if (job.polls >= videoPolls) {
      const now = Math.floor(Date.now() / 1000);
      v.completed_at = now;
      if (v.model === "stub-video-fail") {
        v.status = "failed";
        v.error = { code: "video_generation_failed", message: "Video generation failed (stub-video-fail)." };
      } else {
        v.status = "completed";
        v.progress = 100;
        v.expires_at = now + 3600;
      }
    } else if (job.polls > 0) {
      v.status = "in_progress";
      v.progress = Math.floor((100 * job.polls) / videoPolls);
    }
  }

  function videoRoute(ctx: Ctx, rest: string): void {
    const [id, sub, extra] = rest.split("/");
    const job = videos.get(id);
    if (!job || extra !== undefined) {
      if (sub && sub !== "content") return sendError(ctx, invalidUrl(ctx.method, ctx.path));
      return sendError(ctx, notFound(`Video with id '${id}' not found.`, "video_id"));
    }
    if (sub === undefined && ctx.method === "GET") {
      job.polls++;
      advance(job);
      return sendJson(ctx, 200, JSON.stringify(job.video));
    }
    if (sub === undefined && ctx.method === "DELETE") {
      videos.delete(id);
      return sendJson(ctx, 200, JSON.stringify({ id, object: "video.deleted", deleted: true }));
    }
    if (sub === "content" && ctx.method === "GET") {
      if (job.video.status !== "completed") {
        return sendError(ctx, openaiError(400, `Video is not ready yet. Current status: ${job.video.status}.`, "invalid_request_error", null, "video_not_ready"));
      }
      const variant = new URLSearchParams(ctx.query).get("variant") ?? "video";
      if (variant === "video") return sendRaw(ctx.res, 200, "video/mp4", MP4_BYTES, ctx.seq);
      if (variant === "thumbnail" || variant === "spritesheet") return sendRaw(ctx.res, 200, "image/png", PNG_BYTES, ctx.seq);
      return sendError(ctx, invalidValue("variant", `Invalid value: '${variant}'. Supported values are: 'video', 'thumbnail', and 'spritesheet'.`));
    }
    sendError(ctx, invalidUrl(ctx.method, ctx.path));
  }

  // ---- dispatch ------------------------------------------------------------------------
  /** The parsed body, or the error to answer with (the raw text is then recorded as the body). */
  async function parseBody(ctx: Ctx): Promise<{ body: unknown; error?: StubError }> {
    const { raw } = ctx;
    if (raw.length === 0) return { body: undefined };
    const ct = ctx.req.headers["content-type"] ?? "";
    if (ct.startsWith("multipart/form-data")) {
      try {
        return { body: await parseMultipart(raw, ct) };
      } catch {
        return { body: raw.toString("latin1"), error: openaiError(400, "Could not parse multipart form", "invalid_request_error") };
      }
    }
    const text = raw.toString("utf8");
    if (ct === "" || ct.includes("json")) {
      try {
        return { body: JSON.parse(text) };
      } catch {
        return { body: text, error: invalidJson() };
      }
    }
    return { body: text };
  }

  async function handle(ctx: Ctx): Promise<void> {
    const { method, path } = ctx;
    const { body, error } = await parseBody(ctx);
    if (record) requests.push({ method, path, query: ctx.query, headers: ctx.req.headers, body, answered: () => ctx.res.writableFinished });
    if (error) return sendError(ctx, error);

    // public, like OpenAI's signed image URLs
    if (method === "GET" && path.startsWith("/files/images/") && path.endsWith(".png")) {
      return sendRaw(ctx.res, 200, "image/png", PNG_BYTES, ctx.seq);
    }
    if (!path.startsWith("/v1/")) return sendError(ctx, invalidUrl(method, path));
    if (fault && method === "POST" && (fault.times === undefined || fault.times > 0)) {
      const f = fault;
      if (f.times !== undefined) f.times--;
      faulted++;
      if (f.hang) {
        await wait(ctx.res, 3_600_000);
        return;
      }
      if (f.drop) {
        ctx.req.socket.destroy();
        return;
      }
      if ((f.breakStream || f.stallStream) && path === "/v1/chat/completions" && (body as ChatRequest | undefined)?.stream === true) {
        const events = streamEvents(planChat(body as ChatRequest, (body as ChatRequest).messages as ChatMessage[], ctx.seq), `chatcmpl-stub${ctx.seq}`, String((body as ChatRequest).model), Math.floor(Date.now() / 1000), false);
        ctx.res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
        ctx.res.write(events[0]);
        ctx.res.write(events[1]);
        if (f.stallStream) await wait(ctx.res, 3_600_000);
        else setTimeout(() => ctx.res.destroy(), 50);
        return;
      }
      if (f.status) {
        const err = openaiError(f.status, f.message ?? `stub fault ${f.status}`, f.status === 429 ? "requests" : "server_error", null, f.status === 429 ? "rate_limit_exceeded" : null);
        return sendRaw(ctx.res, err.status, "application/json", err.body, ctx.seq, { ...err.headers, ...(f.retryAfter ? { "retry-after": f.retryAfter } : {}) });
      }
    }

    const auth = ctx.req.headers.authorization;
    if (auth !== expectedAuth) {
      if (!auth || !auth.startsWith("Bearer ") || auth.length <= 7) return sendError(ctx, missingKey());
      return sendError(ctx, wrongKey(auth.slice(7)));
    }

    if (method === "POST") {
      if (body === null || typeof body !== "object" || Array.isArray(body)) {
        return sendError(ctx, openaiError(400, "The request body must be a JSON object or multipart form.", "invalid_request_error"));
      }
      const b = body as Record<string, unknown>;
      if (path === "/v1/chat/completions") return chatCompletions(ctx, b as ChatRequest);
      const failure = failureFor(b.model);
      if (failure) return sendError(ctx, failure);
      if (b.model === "stub-slow" && !(await wait(ctx.res, slowMs))) return;
      switch (path) {
        case "/v1/embeddings":
          return embeddings(ctx, b);
        case "/v1/responses":
          if (opts.responsesApi) return responsesRoute(ctx, b);
          break;
        case "/v1/responses/compact":
          if (opts.responsesApi) return responsesRoute(ctx, b, true);
          break;
        case "/v1/images/generations":
          return imagesGenerations(ctx, b);
        case "/v1/audio/speech":
          return speech(ctx, b);
        case "/v1/audio/transcriptions":
          return transcription(ctx, b, "transcribe");
        case "/v1/audio/translations":
          return transcription(ctx, b, "translate");
        case "/v1/videos":
          return videoCreate(ctx, b);
      }
      return sendError(ctx, invalidUrl(method, path));
    }

    if (method === "GET" && path === "/v1/models") {
      const data = MODELS.map((id) => ({ id, object: "model", created: MODELS_CREATED, owned_by: id.startsWith("stub") ? "stub" : "openai" }));
      return sendJson(ctx, 200, JSON.stringify({ object: "list", data }));
    }
    if (method === "GET" && path.startsWith("/v1/models/")) {
      const id = decodeURIComponent(path.slice("/v1/models/".length));
      if (!MODELS.includes(id)) return sendError(ctx, notFound(`The model '${id}' does not exist`, "model"));
      return sendJson(ctx, 200, JSON.stringify({ id, object: "model", created: MODELS_CREATED, owned_by: id.startsWith("stub") ? "stub" : "openai" }));
    }
    if (method === "GET" && path === "/v1/videos") {
      const data = [...videos.values()].map((j) => j.video).reverse();
      return sendJson(ctx, 200, JSON.stringify({ object: "list", data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: false }));
    }
    if (path.startsWith("/v1/videos/")) return videoRoute(ctx, path.slice("/v1/videos/".length));
    sendError(ctx, invalidUrl(method, path));
  }

  const server = createServer({ keepAlive: true, keepAliveTimeout: 65_000, headersTimeout: 66_000, requestTimeout: 0 }, (req, res) => {
    const n = ++seq;
    res.on("close", onResponseClose);
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const ctx: Ctx = {
      req,
      res,
      method: req.method ?? "GET",
      path: q < 0 ? url : url.slice(0, q),
      query: q < 0 ? "" : url.slice(q),
      seq: n,
      raw: EMPTY,
    };
    let first: Buffer | undefined;
    let more: Buffer[] | undefined;
    req.on("data", (chunk: Buffer) => {
      if (first === undefined) first = chunk;
      else (more ??= [first]).push(chunk);
    });
    req.on("end", () => {
      ctx.raw = more ? Buffer.concat(more) : (first ?? EMPTY);
      handle(ctx).catch((err: unknown) => {
        if (!res.headersSent) sendError(ctx, openaiError(500, `stub bug: ${String(err)}`, "server_error"));
        else res.destroy();
      });
    });
  });
  server.keepAliveTimeout = 65_000;

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  origin = `http://${host}:${address.port}`;

  return {
    url: `${origin}/v1`,
    origin,
    port: address.port,
    requests,
    get disconnects() {
      return disconnects;
    },
    get requestCount() {
      return seq;
    },
    setFault(f: StubFault | null) {
      fault = f ? { ...f } : null;
    },
    get faulted() {
      return faulted;
    },
    reset() {
      faulted = 0;
      requests.length = 0;
      videos.clear();
      seq = 0;
      disconnects = 0;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

export { countWords, promptTokens, words, messageText } from "./openai-chat.ts";

/** The stub's embedding of a text: a deterministic unit vector (float32-exact values). */
export const stubVector = (text: string, dims: number): number[] => unitVector(text, dims, 2166136261);
