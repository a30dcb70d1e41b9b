// A stub upstream that speaks Google's Generative Language API (Gemini) over HTTP, the way the
// AI SDK's Google provider (@ai-sdk/google) calls it, for tests.
//
//   const stub = await startGeminiStub();     // stub.url = http://127.0.0.1:<port>/v1beta
//   createGoogleGenerativeAI({ baseURL: stub.url, apiKey: stub.apiKey })
//   stub.requests → every request: { method, path, query, headers (lowercased), body }
//
// Auth: `x-goog-api-key: <apiKey>` (default "gemini-stub-key") or `?key=<apiKey>`. A wrong key
// is what Google answers: 400 INVALID_ARGUMENT "API key not valid…" with an ErrorInfo detail
// of reason API_KEY_INVALID; no key: 403 PERMISSION_DENIED. Errors in Google's shape
// {"error": {"code", "message", "status", "details"?}}.
// Routes (model ids: any; "models/" is part of the path):
//   POST /v1beta/models/{model}:generateContent
//   POST /v1beta/models/{model}:streamGenerateContent?alt=sse   SSE, one GenerateContentResponse
//        per `data:` event (\r\n\r\n-separated, as Google sends them), one per word of the reply;
//        every event carries usageMetadata with the candidates counted so far, the last one
//        finishReason. Without alt=sse: the same responses as one JSON array.
//   POST /v1beta/models/{model}:countTokens           {totalTokens}; {contents} or {generateContentRequest: {model: "models/{model}", …}}
//   POST /v1beta/models/{model}:embedContent          {embedding: {values}}
//   POST /v1beta/models/{model}:batchEmbedContents    {embeddings: [{values}]}; every request's
//        model must be "models/{model}"; like Google's, no token counts in the answer
//   GET  /v1beta/models                               {models: [{name, …}]}
//
// Deterministic answers, words(s) = whitespace-separated words:
//   promptTokenCount     = words(systemInstruction) + Σ contents (1 + words of its text parts and
//                          of the JSON of functionCall args / functionResponse responses)
//   candidatesTokenCount = words of the reply text, or of the functionCall's args JSON
//   reply: function declarations given, functionCallingConfig mode not NONE, the last content a
//          user turn without a functionResponse → one functionCall (the allowed or first function)
//          with args {<first string property or "query">: <last user text>};
//          a last user turn with a functionResponse → "Tool result received: <its words>";
//          otherwise "Hello from gemini stub: <last user text>"; with responseMimeType
//          application/json that text as {"reply": <text>}.
//   stopSequences cut the reply before the earliest one; maxOutputTokens cuts it to its first N
//   words (finishReason MAX_TOKENS); else finishReason STOP.
//   Embeddings: geminiVector(text, dims): dims = outputDimensionality, else 3072 (768 for
//   text-embedding-004); unit vectors of float32 values.
// Scripted for agents (opts.plan, or stub.plan set later; test/agents/gemini.agents.ts): a call
// whose contents hold no functionResponse yet gets the one functionCall plan(names of the declared
// functions) picks (an id "call_gemini_<n>"); a call that carries one, or that plan answers null,
// gets `final` ("AGENT-DONE" unless given). stub.toolCalls counts the calls asked for.
// Failure triggers by model: "gemini-500" → 500 INTERNAL, "gemini-503" → 503 UNAVAILABLE,
// "gemini-429" → 429 RESOURCE_EXHAUSTED; "gemini-slow-stream" streams "w1 … w20", one event
// every 60 ms (a client that goes away counts in stub.disconnects); "gemini-stream-error" streams its first word and then
// an {"error": …} event (500 INTERNAL), as Google does when a stream fails after it began.
// The server is unref'd: a test that forgets close() does not keep its process alive.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readJsonBody } from './http.ts';
import { unitVector } from './vector.ts';

export type GeminiRequest = { method: string; path: string; query: Record<string, string>; headers: IncomingHttpHeaders; body: any };

export type GeminiPlan = (tools: string[]) => { name: string; args: Record<string, unknown> } | null;

export type GeminiStub = {
  /** The agent script (see above); undefined: the deterministic replies. */
  plan?: GeminiPlan;
  /** Function calls the script asked for. */
  readonly toolCalls: number;
  /** Slow streams whose client went away before their end. */
  readonly disconnects: number;
  /** Base URL with /v1beta (what citygate's provider slot and the AI SDK take). */
  url: string;
  origin: string;
  apiKey: string;
  requests: GeminiRequest[];
  close(): Promise<void>;
};

type Part = { text?: string; functionCall?: { name: string; args?: unknown; id?: string }; functionResponse?: { name: string; response?: unknown }; [k: string]: unknown };
type Content = { role?: string; parts: Part[] };

const words = (s: string) => s.split(/\s+/).filter(Boolean);

const STATUS: Record<number, string> = { 400: 'INVALID_ARGUMENT', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE' };

export function googleError(code: number, message: string, details?: unknown[]) {
  return { error: { code, message, status: STATUS[code] ?? 'UNKNOWN', ...(details ? { details } : {}) } };
}

const FAILURES: Record<string, [number, string]> = {
  'gemini-500': [500, 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting'],
  'gemini-503': [503, 'The model is overloaded. Please try again later.'],
  'gemini-429': [429, 'You exceeded your current quota, please check your plan and billing details.'],
};

/** Words of one content's parts, as the prompt count sees them. */
function partWords(p: Part): number {
  if (typeof p.text === 'string') return words(p.text).length;
  if (p.functionCall) return words(JSON.stringify(p.functionCall.args ?? {})).length;
  if (p.functionResponse) return words(JSON.stringify(p.functionResponse.response ?? {})).length;
  return 0;
}

export function promptTokenCount(body: any): number {
  let n = 0;
  for (const p of (body.systemInstruction?.parts ?? []) as Part[]) n += partWords(p);
  for (const c of body.contents as Content[]) {
    n += 1;
    for (const p of c.parts) n += partWords(p);
  }
  return n;
}

function validate(body: any): string | null {
  if (!Array.isArray(body?.contents) || body.contents.length === 0) return '* GenerateContentRequest.contents: contents is not specified';
  for (const [i, c] of (body.contents as Content[]).entries()) {
    if (c?.role !== undefined && c.role !== 'user' && c.role !== 'model') return `* GenerateContentRequest.contents[${i}].role: Please use a valid role: user, model.`;
    if (!Array.isArray(c?.parts) || c.parts.length === 0) return `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`;
  }
  const max = body.generationConfig?.maxOutputTokens;
  if (max !== undefined && !(Number.isInteger(max) && max > 0)) return '* GenerateContentRequest.generation_config.max_output_tokens: must be a positive integer.';
  return null;
}

type Plan = { parts: Part[]; finishReason: string; output: number };

function scripted(body: any, pick: GeminiPlan, n: number): Plan | null {
  const contents = body.contents as Content[];
  const answered = contents.some((c) => c.parts.some((p) => p.functionResponse));
  const names = ((body.tools ?? []) as any[]).flatMap((t) => t?.functionDeclarations ?? []).map((f: any) => String(f.name));
  const call = !answered && names.length ? pick(names) : null;
  if (!call) return null;
  return { parts: [{ functionCall: { name: call.name, args: call.args, id: `call_gemini_${n}` } }], finishReason: 'STOP', output: words(JSON.stringify(call.args)).length };
}

function plan(body: any): Plan {
  const contents = body.contents as Content[];
  const last = contents[contents.length - 1];
  const fromUser = last.role !== 'model';
  const lastText = fromUser ? words(last.parts.map((p) => p.text ?? '').join(' ')).join(' ') : '';
  const results = fromUser ? last.parts.filter((p) => p.functionResponse) : [];
  const fns = ((body.tools ?? []) as any[]).flatMap((t) => t?.functionDeclarations ?? []);
  const cfg = body.toolConfig?.functionCallingConfig;
  if (fns.length && cfg?.mode !== 'NONE' && fromUser && results.length === 0) {
    const fn = fns.find((f: any) => cfg?.allowedFunctionNames?.includes(f.name)) ?? fns[0];
    const props = (fn.parametersJsonSchema ?? fn.parameters)?.properties ?? {};
    const key = Object.keys(props).find((k) => props[k]?.type === undefined || String(props[k].type).toLowerCase() === 'string') ?? 'query';
    const args = { [key]: lastText };
    return { parts: [{ functionCall: { name: fn.name, args } }], finishReason: 'STOP', output: words(JSON.stringify(args)).length };
  }
  let text = results.length
    ? 'Tool result received: ' + words(results.map((p) => JSON.stringify(p.functionResponse!.response ?? {})).join(' ')).join(' ')
    : lastText
      ? `Hello from gemini stub: ${lastText}`
      : 'Hello from gemini stub:';
  const g = body.generationConfig ?? {};
  let cut = -1;
  for (const s of g.stopSequences ?? []) {
    const at = s ? text.indexOf(s) : -1;
    if (at >= 0 && (cut < 0 || at < cut)) cut = at;
  }
  if (cut >= 0) text = text.slice(0, cut);
  let finishReason = 'STOP';
  if (g.maxOutputTokens !== undefined && words(text).length > g.maxOutputTokens) {
    text = words(text).slice(0, g.maxOutputTokens).join(' ');
    finishReason = 'MAX_TOKENS';
  }
  if (g.responseMimeType === 'application/json') text = JSON.stringify({ reply: text });
  return { parts: [{ text }], finishReason, output: words(text).length };
}

/** The stub's embedding of a text: a deterministic unit vector of float32 values (not the OpenAI stub's). */
export const geminiVector = (text: string, dims: number): number[] => unitVector(text, dims, 0x9e3779b9);

/** cachedTokens: every answer reports that many prompt tokens as read from cached content (cachedContentTokenCount). */
export async function startGeminiStub(opts: { apiKey?: string; cachedTokens?: number; plan?: GeminiPlan; final?: string } = {}): Promise<GeminiStub> {
  const apiKey = opts.apiKey ?? 'gemini-stub-key';
  const requests: GeminiRequest[] = [];
  let seq = 0;
  let toolCalls = 0;
  let disconnects = 0;
  const final = opts.final ?? 'AGENT-DONE';

  const server = createServer(async (req, res) => {
    const { raw, body, badJson } = await readJsonBody(req);
    const n = ++seq;
    const url = new URL(req.url ?? '/', 'http://stub.invalid');
    const query = Object.fromEntries(url.searchParams);
    requests.push({ method: req.method ?? 'GET', path: url.pathname, query, headers: req.headers, body });
    const send = (status: number, payload: unknown) => {
      const text = JSON.stringify(payload);
      res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    const fail = (code: number, message: string, details?: unknown[]) => send(code, googleError(code, message, details));

    const key = req.headers['x-goog-api-key'] ?? query.key;
    if (!key) return fail(403, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.");
    if (key !== apiKey) {
      return fail(400, 'API key not valid. Please pass a valid API key.', [
        { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'generativelanguage.googleapis.com' } },
      ]);
    }
    if (req.method === 'GET' && url.pathname === '/v1beta/models') {
      const models = ['gemini-2.5-flash', 'gemini-2.5-pro', 'gemini-embedding-001'].map((id) => ({
        name: `models/${id}`,
        displayName: id,
        supportedGenerationMethods: id.includes('embedding') ? ['embedContent', 'batchEmbedContents'] : ['generateContent', 'countTokens'],
      }));
      return send(200, { models });
    }
    const m = /^\/v1beta\/models\/([^/:]+):([A-Za-z]+)$/.exec(url.pathname);
    if (req.method !== 'POST' || !m) return fail(404, `Method not found: ${req.method} ${url.pathname}`);
    const [, model, method] = m;
    if (badJson) return fail(400, `Invalid JSON payload received. ${raw.slice(0, 40)}`);
    const failure = FAILURES[model];
    if (failure) return fail(failure[0], failure[1]);

    if (method === 'embedContent' || method === 'batchEmbedContents') {
      const reqs = method === 'embedContent' ? [body] : body?.requests;
      if (!Array.isArray(reqs) || reqs.length === 0) return fail(400, '* BatchEmbedContentsRequest.requests: requests is not specified');
      const vectors: { values: number[] }[] = [];
      for (const [i, r] of reqs.entries()) {
        if (method === 'batchEmbedContents' && r?.model !== `models/${model}`) {
          return fail(400, `* BatchEmbedContentsRequest.requests[${i}].model: Model names should match the parent model: models/${model}, got ${r?.model}.`);
        }
        const parts = r?.content?.parts;
        if (!Array.isArray(parts) || parts.length === 0) return fail(400, `* BatchEmbedContentsRequest.requests[${i}].content: content is not specified`);
        const dims = r.outputDimensionality ?? (model === 'text-embedding-004' ? 768 : 3072);
        vectors.push({ values: geminiVector(parts.map((p: Part) => p.text ?? '').join(' '), dims) });
      }
      return send(200, method === 'embedContent' ? { embedding: vectors[0] } : { embeddings: vectors });
    }
    if (method !== 'generateContent' && method !== 'streamGenerateContent' && method !== 'countTokens') {
      return fail(404, `models/${model} is not found for API version v1beta, or is not supported for ${method}.`);
    }
    // countTokens may wrap a whole request (generateContentRequest, naming its model as Google's batch calls do)
    const inner = method === 'countTokens' && body?.generateContentRequest ? body.generateContentRequest : body;
    if (inner !== body && inner.model !== `models/${model}`) return fail(400, `* CountTokensRequest.generate_content_request.model: must be models/${model}, got ${inner.model}.`);
    const bad = validate(inner);
    if (bad) return fail(400, bad);
    const prompt = promptTokenCount(inner);
    if (method === 'countTokens') return send(200, { totalTokens: prompt });

    let p: Plan;
    if (stub.plan) {
      const call = scripted(body, stub.plan, n);
      if (call) toolCalls++;
      p = call ?? { parts: [{ text: final }], finishReason: 'STOP', output: words(final).length };
    } else p = plan(body);
    const responseId = `stub-gemini-${n}`;
    const usage = (candidates: number) => ({
      promptTokenCount: prompt,
      candidatesTokenCount: candidates,
      totalTokenCount: prompt + candidates,
      promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
      ...(opts.cachedTokens ? { cachedContentTokenCount: opts.cachedTokens } : {}),
    });
    const response = (parts: Part[], candidates: number, finishReason?: string) => ({
      candidates: [{ content: { parts, role: 'model' }, ...(finishReason ? { finishReason } : {}), index: 0 }],
      usageMetadata: usage(candidates),
      modelVersion: model,
      responseId,
    });
    if (method === 'generateContent') return send(200, response(p.parts, p.output, p.finishReason));

    // streamGenerateContent: text one word a response; a function call as one response.
    const events: object[] = [];
    const text = p.parts[0].text;
    if (text === undefined) events.push(response(p.parts, p.output, p.finishReason));
    else {
      const pieces = text.match(/\s*\S+/g) ?? [''];
      let so = 0;
      pieces.forEach((piece, i) => {
        so += words(piece).length;
        events.push(response([{ text: piece }], so, i === pieces.length - 1 ? p.finishReason : undefined));
      });
    }
    if (model === 'gemini-stream-error') events.splice(1, events.length, googleError(500, 'An internal error has occurred.'));
    if (query.alt !== 'sse') return send(200, events);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    if (model === 'gemini-slow-stream') {
      // 20 words "w1 … w20", one event every 60 ms; a client gone stops it (stub.disconnects)
      let i = 0;
      const timer = setInterval(() => {
        if (res.destroyed) return;
        i++;
        res.write(`data: ${JSON.stringify(response([{ text: `${i > 1 ? ' ' : ''}w${i}` }], i, i === 20 ? 'STOP' : undefined))}\r\n\r\n`);
        if (i === 20) {
          clearInterval(timer);
          res.end();
        }
      }, 60);
      res.on('close', () => {
        clearInterval(timer);
        if (i < 20) disconnects++;
      });
      return;
    }
    for (const e of events) (res as ServerResponse).write(`data: ${JSON.stringify(e)}\r\n\r\n`);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  const stub: GeminiStub = {
    url: `${origin}/v1beta`,
    origin,
    apiKey,
    requests,
    plan: opts.plan,
    get toolCalls() {
      return toolCalls;
    },
    get disconnects() {
      return disconnects;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return stub;
}
