// A scripted upstream for coding agents (Claude Code, Codex, the Agents SDK), speaking three
// real protocols at once over HTTP, for tests:
//   POST /v1/messages           Anthropic Messages (JSON or SSE)
//   POST /v1/chat/completions   OpenAI Chat Completions (JSON or SSE, usage with include_usage)
//   POST /v1/responses          OpenAI Responses (JSON or SSE)
// and GET /v1/models (an empty list), POST /v1/messages/count_tokens ({input_tokens: 10}).
//
// The script, the same on every protocol: a turn whose conversation holds fewer tool results
// than `toolTurns` (default 1) asks for one more tool call (`plan(toolNames)` picks the tool
// and its arguments; with no tools or no pick, it answers the final text at once); after
// that it answers `final` ("AGENT-DONE" unless given). A compacted conversation gets the final
// text too (the work is done), and a compaction asked for is answered: on the Responses API
// with one OpenAI-style compaction item ("oa-cmp:…"), elsewhere with the final text as the
// summary. Side calls a client makes on its own (titles, quota checks) get the final text
// too, so every call is one upstream call.
//
// Usage: what `usage` says, per protocol shape (Anthropic: input, cache writes 5 m / 1 h and
// cache reads apart; OpenAI: prompt tokens including cached ones). `requests` keeps every
// request (path, lower-cased headers, parsed body).
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readJsonBody } from './http.ts';

export interface ScriptUsage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
}

export interface AgentStubOptions {
  /** Picks the tool call of a first turn from the tools offered (their names); null: answer at once. */
  plan?: (tools: string[]) => { name: string; args: Record<string, unknown> } | null;
  final?: string;
  usage?: Partial<ScriptUsage>;
}

export interface AgentStub {
  /** Base URL with /v1. */
  url: string;
  origin: string;
  requests: { path: string; headers: IncomingHttpHeaders; body: any }[];
  /** The script's tool pick, replaceable between runs. */
  plan: AgentStubOptions['plan'];
  /** Model calls answered (messages, chat completions, responses). */
  readonly calls: number;
  /** Tool calls asked for. */
  readonly toolCalls: number;
  /** Tool calls a conversation gets before the final answer (default 1), replaceable between runs. */
  toolTurns: number;
  /** Compactions answered: OpenAI's (a compaction_trigger on /responses) and the summaries a gateway asked a chat model for. */
  readonly compactions: number;
  close(): Promise<void>;
}

const DEFAULT_USAGE: ScriptUsage = { input: 50, output: 12, cacheRead: 1000, cacheWrite5m: 200, cacheWrite1h: 100 };

/** Tool names of a request, whatever the protocol (namespace tools list their members as ns.name). */
function toolNames(body: any): string[] {
  const out: string[] = [];
  for (const t of body?.tools ?? []) {
    if (t?.type === 'function' && t.function?.name) out.push(t.function.name);
    else if (t?.type === 'namespace' && Array.isArray(t.tools)) for (const m of t.tools) out.push(`${t.name}.${m.name}`);
    else if (typeof t?.name === 'string') out.push(t.name);
  }
  return out;
}

/** The tool results the conversation carries. */
function toolResults(body: any): number {
  const items: any[] = Array.isArray(body?.messages) ? body.messages : Array.isArray(body?.input) ? body.input : [];
  let n = 0;
  for (const m of items) {
    if (m?.role === 'tool' || m?.type === 'function_call_output' || m?.type === 'custom_tool_call_output') n++;
    else if (Array.isArray(m?.content)) n += m.content.filter((b: any) => b?.type === 'tool_result').length;
  }
  return n;
}

/** A conversation that was compacted (OpenAI's compaction item, or a gateway's summary given back as text): the work is done, the final answer follows. */
const compacted = (raw: string) => raw.includes('"type":"compaction"') || raw.includes('Summary of the conversation so far');
/** A request to compact: OpenAI's trigger item, or a gateway asking a chat model for the summary. */
const compactionAsked = (body: any, raw: string) =>
  (Array.isArray(body?.input) && body.input.at(-1)?.type === 'compaction_trigger') || raw.includes('Your context window is about to be replaced by a summary');

const sse = (res: ServerResponse) => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  return (event: string | null, data: unknown) => res.write(`${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
};

export async function startAgentStub(opts: AgentStubOptions = {}): Promise<AgentStub> {
  const u: ScriptUsage = { ...DEFAULT_USAGE, ...opts.usage };
  const final = opts.final ?? 'AGENT-DONE';
  const requests: AgentStub['requests'] = [];
  let calls = 0;
  let toolCalls = 0;
  let compactions = 0;
  let n = 0;

  const decide = (body: any) => {
    const raw = JSON.stringify(body ?? null);
    if (compactionAsked(body, raw)) {
      compactions++;
      return null;
    }
    if (toolResults(body) >= stub.toolTurns || compacted(raw) || body?.tool_choice === 'none') return null;
    const names = toolNames(body);
    return names.length && stub.plan ? stub.plan(names) : null;
  };

  const server = createServer(async (req, res) => {
    const { body } = await readJsonBody(req);
    const path = new URL(req.url ?? '/', 'http://stub.invalid').pathname;
    requests.push({ path, headers: req.headers, body });
    const json = (status: number, b: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(b));
    };
    if (req.method === 'GET' && path.endsWith('/models')) return json(200, { object: 'list', data: [] });
    if (path.endsWith('/messages/count_tokens')) return json(200, { input_tokens: 10 });
    const call = path.endsWith('/messages') || path.endsWith('/chat/completions') || path.endsWith('/responses') ? decide(body) : undefined;
    if (call === undefined) return json(404, { error: { message: `no route ${path}` } });
    calls++;
    if (call) toolCalls++;
    const id = `call_stub_${++n}`;
    const args = call ? JSON.stringify(call.args) : '';
    const stream = body?.stream === true;

    if (path.endsWith('/messages')) {
      const usage = {
        input_tokens: u.input,
        cache_creation_input_tokens: u.cacheWrite5m + u.cacheWrite1h,
        cache_read_input_tokens: u.cacheRead,
        cache_creation: { ephemeral_5m_input_tokens: u.cacheWrite5m, ephemeral_1h_input_tokens: u.cacheWrite1h },
        output_tokens: u.output,
      };
      const block = call ? { type: 'tool_use', id: `toolu_${id}`, name: call.name, input: call.args } : { type: 'text', text: final };
      const stop = call ? 'tool_use' : 'end_turn';
      if (!stream) return json(200, { id: `msg_${id}`, type: 'message', role: 'assistant', model: body.model, content: [block], stop_reason: stop, stop_sequence: null, usage });
      const send = sse(res);
      send('message_start', { type: 'message_start', message: { id: `msg_${id}`, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
      send('content_block_start', { type: 'content_block_start', index: 0, content_block: call ? { ...block, input: {} } : { type: 'text', text: '' } });
      send('content_block_delta', { type: 'content_block_delta', index: 0, delta: call ? { type: 'input_json_delta', partial_json: args } : { type: 'text_delta', text: final } });
      send('content_block_stop', { type: 'content_block_stop', index: 0 });
      // cumulative counts, as Anthropic's message_delta restates them (without the cache_creation split)
      send('message_delta', { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { input_tokens: u.input, cache_creation_input_tokens: usage.cache_creation_input_tokens, cache_read_input_tokens: u.cacheRead, output_tokens: u.output } });
      send('message_stop', { type: 'message_stop' });
      return res.end();
    }

    const prompt = u.input + u.cacheRead + u.cacheWrite5m + u.cacheWrite1h;
    if (path.endsWith('/chat/completions')) {
      const usage = { prompt_tokens: prompt, completion_tokens: u.output, total_tokens: prompt + u.output, prompt_tokens_details: { cached_tokens: u.cacheRead } };
      const toolCall = call && { id, type: 'function', function: { name: call.name, arguments: args } };
      const finish = call ? 'tool_calls' : 'stop';
      const base = { id: `chatcmpl-${id}`, created: 1, model: body.model };
      if (!stream) {
        return json(200, { ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: call ? null : final, ...(call ? { tool_calls: [toolCall] } : {}) }, finish_reason: finish }], usage });
      }
      const send = sse(res);
      const chunk = (delta: object, finish_reason: string | null) => send(null, { ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason }] });
      chunk({ role: 'assistant', content: '' }, null);
      if (call) chunk({ tool_calls: [{ index: 0, ...toolCall }] }, null);
      else chunk({ content: final }, null);
      chunk({}, finish);
      if (body.stream_options?.include_usage) send(null, { ...base, object: 'chat.completion.chunk', choices: [], usage });
      send(null, '[DONE]');
      return res.end();
    }

    // Responses
    if (Array.isArray(body?.input) && body.input.at(-1)?.type === 'compaction_trigger') {
      // OpenAI's compaction: one compaction item only OpenAI reads
      const cmp = { type: 'compaction', id: `cmp_${id}`, encrypted_content: `oa-cmp:summary of ${body.input.length - 1} items` };
      const usage = { input_tokens: prompt, input_tokens_details: { cached_tokens: u.cacheRead }, output_tokens: u.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: prompt + u.output };
      const done = { id: `resp_${id}`, object: 'response', created_at: 1, status: 'completed', model: body.model, output: [cmp], usage, error: null, incomplete_details: null, tools: [], parallel_tool_calls: true };
      if (!stream) return json(200, done);
      const send = sse(res);
      send('response.created', { type: 'response.created', response: { ...done, status: 'in_progress', output: [], usage: null }, sequence_number: 0 });
      send('response.output_item.added', { type: 'response.output_item.added', output_index: 0, item: cmp, sequence_number: 1 });
      send('response.output_item.done', { type: 'response.output_item.done', output_index: 0, item: cmp, sequence_number: 2 });
      send('response.completed', { type: 'response.completed', response: done, sequence_number: 3 });
      return res.end();
    }
    const usage = { input_tokens: prompt, input_tokens_details: { cached_tokens: u.cacheRead }, output_tokens: u.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: prompt + u.output };
    const dot = call ? call.name.lastIndexOf('.') : -1;
    const item = call
      ? { type: 'function_call', id: `fc_${id}`, call_id: id, name: dot > 0 ? call.name.slice(dot + 1) : call.name, ...(dot > 0 ? { namespace: call.name.slice(0, dot) } : {}), arguments: args, status: 'completed' }
      : { type: 'message', id: `msg_${id}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: final, annotations: [] }] };
    const response = (status: string, output: unknown[], usage: unknown) => ({ id: `resp_${id}`, object: 'response', created_at: 1, status, model: body.model, output, usage, error: null, incomplete_details: null, tools: [], parallel_tool_calls: true });
    if (!stream) return json(200, response('completed', [item], usage));
    const send = sse(res);
    let seq = 0;
    const ev = (type: string, data: object) => send(type, { type, ...data, sequence_number: seq++ });
    ev('response.created', { response: response('in_progress', [], null) });
    ev('response.in_progress', { response: response('in_progress', [], null) });
    if (call) {
      ev('response.output_item.added', { output_index: 0, item: { ...item, arguments: '', status: 'in_progress' } });
      ev('response.function_call_arguments.delta', { item_id: item.id, output_index: 0, delta: args });
      ev('response.function_call_arguments.done', { item_id: item.id, output_index: 0, arguments: args });
    } else {
      ev('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
      ev('response.content_part.added', { item_id: item.id, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
      ev('response.output_text.delta', { item_id: item.id, output_index: 0, content_index: 0, delta: final });
      ev('response.output_text.done', { item_id: item.id, output_index: 0, content_index: 0, text: final });
      ev('response.content_part.done', { item_id: item.id, output_index: 0, content_index: 0, part: { type: 'output_text', text: final, annotations: [] } });
    }
    ev('response.output_item.done', { output_index: 0, item });
    ev('response.completed', { response: response('completed', [item], usage) });
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${port}`;
  const stub: AgentStub = {
    url: `${origin}/v1`,
    origin,
    requests,
    plan: opts.plan,
    toolTurns: 1,
    get compactions() {
      return compactions;
    },
    get calls() {
      return calls;
    },
    get toolCalls() {
      return toolCalls;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return stub;
}
