// The request bodies real agent clients send, replayed against citygate (fixtures recorded from
// Claude Code, Codex CLI, the OpenAI Agents SDK, Gemini CLI and @google/genai talking to a scripted upstream: see
// test/ai/fixtures/ and `npm run test:agents`, which runs the clients themselves). Each replay
// is a turn of the client's loop: the first asks for a tool call, the second carries the tool
// result and gets the final answer. Forwarded, the upstream gets the body as sent (model id
// aside) with the client's betas; translated, system turns stay where they stand, namespace
// tools are flattened and their calls come back under the declared names, hosted tools are
// left out and said so. Every call is charged exactly: Σ usage credits = the balance drop.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { client } from '../helpers/http.ts';
import { sleep } from '../helpers/wait.ts';
import { sseEvents, startAgentsWorld, upstreamCalls, type AgentsWorld } from './agents-world.ts';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8')) as { requests: { path: string; headers: Record<string, string>; body: any }[] };
const CLAUDE_OTHER = fixture('claude-code-2.1.197-other-model.json');
const CLAUDE_CLAUDE = fixture('claude-code-2.1.197-claude-model.json');
const CODEX = fixture('codex-0.171.0-default-config.json');
const AGENTS = fixture('openai-agents-0.20.0.json');
const CLAUDE_LATEST = fixture('claude-code-2.1.332-claude-model.json');
const CODEX_WS = JSON.parse(readFileSync(new URL('./fixtures/codex-0.171.0-websocket-compaction.json', import.meta.url), 'utf8')) as { messages: { headers: Record<string, string>; event: any }[] };

let w: AgentsWorld;
before(async () => {
  w = await startAgentsWorld();
});
after(() => w?.close());

/** POSTs a captured request to citygate as the client would: its path under /v1/ai, its headers, the user's token. */
async function replay(token: string, req: { path: string; headers: Record<string, string>; body: any }, model: string) {
  const path = req.path.startsWith('/v1/messages') ? `/v1/ai${req.path}` : `/v1/ai${req.path.slice(3)}`;
  const headers: Record<string, string> = { ...req.headers, authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const res = await fetch(`${w.gw.url}${path}`, { method: 'POST', headers, body: JSON.stringify({ ...req.body, model }) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text };
}

const lastUpstream = () => w.stub.requests.at(-1)!;
const without = (b: any, ...keys: string[]) => Object.fromEntries(Object.entries(b).filter(([k]) => !keys.includes(k)));

describe('Claude Code 2.1.197', () => {
  before(() => {
    w.stub.plan = (tools) => (tools.includes('Write') ? { name: 'Write', args: { file_path: '/home/user/project/hello.txt', content: 'hello' } } : null);
  });

  test('a model it does not know as Claude, translated: system turns kept where they stand, thinking dropped, tool call then final answer', async () => {
    const t = await w.user('cc-translated');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const [first, second] = CLAUDE_OTHER.requests;
    assert.deepEqual(first.body.messages.map((m: any) => m.role), ['user', 'system'], 'the fixture has a system turn inside messages');
    const r1 = await replay(t, first, 'gpt-4o-mini');
    assert.equal(r1.status, 200, r1.text);
    const ev1 = sseEvents(r1.text);
    const toolUse = ev1.find((e) => e.event === 'content_block_start' && e.data.content_block.type === 'tool_use')!.data.content_block;
    assert.equal(toolUse.name, 'Write');
    const up = lastUpstream();
    assert.equal(up.path, '/v1/chat/completions');
    assert.deepEqual(up.body.messages.map((m: any) => m.role), ['system', 'user', 'system'], 'the system turn stays after the first user turn');
    assert.match(up.body.messages[2].content, /Available agent types/);
    assert.equal(up.body.reasoning_effort, undefined, 'thinking is not sent to a model that may not reason');
    assert.ok(up.body.tools.some((x: any) => x.function.name === 'Write'));

    const r2 = await replay(t, second, 'gpt-4o-mini');
    assert.equal(r2.status, 200, r2.text);
    const text = sseEvents(r2.text).filter((e) => e.data.delta?.type === 'text_delta').map((e) => e.data.delta.text).join('');
    assert.equal(text, 'AGENT-DONE');
    const tool = lastUpstream().body.messages.find((m: any) => m.role === 'tool');
    assert.match(tool.content, /File created successfully/);
    await w.settled(t, b0, c0);
  });

  test('an alias id on an Anthropic upstream, forwarded: the body and its betas as sent (model aside); cache writes and reads priced by the catalog', async () => {
    const t = await w.user('cc-forwarded');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    for (const req of CLAUDE_OTHER.requests) {
      const r = await replay(t, req, 'fwd-sonnet');
      assert.equal(r.status, 200, r.text);
      const up = lastUpstream();
      assert.equal(up.path, '/v1/messages');
      assert.deepEqual(without(up.body, 'model'), without(req.body, 'model'), 'everything else untouched');
      assert.equal(up.body.model, 'claude-sonnet-4-5');
      assert.equal(up.headers['anthropic-beta'], req.headers['anthropic-beta'], 'the betas travel as sent');
    }
    const records = await w.settled(t, b0, c0);
    // each turn: 50 input, 200 written to the 5-minute cache, 100 to the 1-hour cache, 1000 read, 12 out
    const each = Math.ceil((50 * 3_000_000 + 200 * 3_750_000 + 100 * 6_000_000 + 1000 * 300_000 + 12 * 15_000_000) / 1e6);
    assert.deepEqual(
      records.map((r) => [r.input_tokens, r.cached_tokens, r.cache_write_tokens, r.cache_write_1h_tokens, r.output_tokens, r.credits]),
      [
        [1350, 1000, 300, 100, 12, each],
        [1350, 1000, 300, 100, 12, each],
      ],
    );
  });

  test('a Claude model id (thinking enabled, no system turns), forwarded', async () => {
    const t = await w.user('cc-claude');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    for (const req of CLAUDE_CLAUDE.requests) {
      const r = await replay(t, req, 'claude-sonnet-4-5');
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(lastUpstream().body, req.body);
    }
    await w.settled(t, b0, c0);
  });
});

describe('Codex CLI 0.171.0, default config', () => {
  test('translated: the namespace flattened, web_search left out and said so; a namespaced call comes back under its declared name', async () => {
    const t = await w.user('codex-translated');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const [first, second] = CODEX.requests;
    assert.ok(first.body.tools.some((x: any) => x.type === 'namespace') && first.body.tools.some((x: any) => x.type === 'web_search'));
    w.stub.plan = (tools) => (tools.includes('multi_agent_v1__spawn_agent') ? { name: 'multi_agent_v1__spawn_agent', args: { message: 'hi' } } : null);
    const r1 = await replay(t, first, 'gpt-4o-mini');
    assert.equal(r1.status, 200, r1.text);
    assert.equal(r1.headers.get('x-citygate-dropped-tools'), 'web_search');
    const names = lastUpstream().body.tools.map((x: any) => x.function.name);
    assert.ok(names.includes('exec_command') && names.includes('multi_agent_v1__spawn_agent') && !names.includes('web_search'), names.join());
    const done = sseEvents(r1.text).find((e) => e.event === 'response.output_item.done')!.data.item;
    assert.deepEqual([done.type, done.namespace, done.name, done.arguments], ['function_call', 'multi_agent_v1', 'spawn_agent', '{"message":"hi"}']);

    // the captured second turn (an exec_command call and its output) → the final answer
    const r2 = await replay(t, second, 'gpt-4o-mini');
    assert.equal(r2.status, 200, r2.text);
    const completed = sseEvents(r2.text).find((e) => e.event === 'response.completed')!.data.response;
    assert.equal(completed.output[0].content[0].text, 'AGENT-DONE');
    const records = await w.settled(t, b0, c0);
    assert.deepEqual(
      records.map((r) => r.note),
      ['hosted tools dropped: web_search', 'hosted tools dropped: web_search'],
    );
    // 1350 prompt tokens of which 1000 cached, 12 out, at gpt-4o-mini's catalog prices
    const each = Math.ceil((350 * 150_000 + 1000 * 75_000 + 12 * 600_000) / 1e6);
    assert.deepEqual(records.map((r) => r.credits), [each, each]);
  });

  test('forwarded to an OpenAI upstream: the body as sent (model aside)', async () => {
    const t = await w.user('codex-forwarded');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    w.stub.plan = (tools) => (tools.includes('exec_command') ? { name: 'exec_command', args: { cmd: 'echo hello > hello.txt' } } : null);
    for (const req of CODEX.requests) {
      const r = await replay(t, req, 'gpt-4.1-mini');
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('x-citygate-dropped-tools'), null);
      assert.deepEqual(without(lastUpstream().body, 'model'), without(req.body, 'model'));
    }
    await w.settled(t, b0, c0);
  });
});

describe('OpenAI Agents SDK 0.20.0', () => {
  before(() => {
    w.stub.plan = (tools) => (tools.includes('get_weather') ? { name: 'get_weather', args: { city: 'Paris' } } : null);
  });

  for (const [label, model] of [
    ['translated', 'gpt-4o-mini'],
    ['forwarded', 'gpt-4.1-mini'],
  ] as const) {
    test(`Responses model (plain and streamed), ${label}; Chat Completions model`, async () => {
      const t = await w.user(`sdk-${label}`);
      const b0 = await w.balance(t);
      const c0 = upstreamCalls(w);
      for (const req of AGENTS.requests) {
        const r = await replay(t, req, model);
        assert.equal(r.status, 200, r.text);
        const first = !JSON.stringify(req.body).includes('sunny in Paris');
        if (first) assert.match(r.text, /get_weather/);
        else assert.match(r.text, /AGENT-DONE/);
      }
      await w.settled(t, b0, c0);
    });
  }
});

// Google's clients speak the Gemini API: the model is in the path, the credential in x-goog-api-key.
const GEMINI_CLI_GOOGLE = fixture('gemini-cli-0.61.0-google-model.json');
const GEMINI_CLI_OTHER = fixture('gemini-cli-0.61.0-other-model.json');
const GENAI = fixture('google-genai-3.3.0.json');

/** POSTs a captured Gemini API request under /v1/ai, on `model` (swapped into its path), with the user's token as x-goog-api-key. */
async function replayGemini(token: string, req: { path: string; headers: Record<string, string>; body: any }, model: string) {
  const path = `/v1/ai${req.path.replace(/\/models\/[^:]+:/, `/models/${model}:`)}`;
  const res = await fetch(`${w.gw.url}${path}`, { method: 'POST', headers: { ...req.headers, 'x-goog-api-key': token }, body: JSON.stringify(req.body) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}
/** The parts of a Gemini SSE answer, joined. */
const geminiParts = (text: string) => sseEvents(text).flatMap((e) => e.data.candidates?.[0]?.content?.parts ?? []);

describe('Gemini CLI 0.61.0', () => {
  before(() => {
    w.stub.plan = (tools) => (tools.includes('write_file') ? { name: 'write_file', args: { file_path: '/home/user/project/hello.txt', content: 'hello' } } : null);
    w.gemini.plan = w.stub.plan;
  });
  after(() => {
    w.gemini.plan = undefined;
  });

  test('translated: system instruction and function declarations reach chat/completions, thinkingConfig dropped; write_file comes back as a functionCall, the final answer after its response', async () => {
    const t = await w.user('gemini-cli-translated');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const [first, second] = GEMINI_CLI_OTHER.requests;
    assert.ok(first.body.generationConfig.thinkingConfig, 'the fixture asks for thoughts');
    const r1 = await replayGemini(t, first, 'gpt-4o-mini');
    assert.equal(r1.status, 200, r1.text);
    const call = geminiParts(r1.text).find((p) => p.functionCall)!.functionCall;
    assert.deepEqual([call.name, call.args], ['write_file', { file_path: '/home/user/project/hello.txt', content: 'hello' }]);
    const up = lastUpstream();
    assert.equal(up.path, '/v1/chat/completions');
    assert.equal(up.body.messages[0].role, 'system');
    assert.ok(up.body.tools.some((x: any) => x.function.name === 'write_file'));
    assert.equal(up.body.reasoning_effort, undefined, 'thinkingConfig is not sent to a model that may not reason');

    const r2 = await replayGemini(t, second, 'gpt-4o-mini');
    assert.equal(r2.status, 200, r2.text);
    assert.equal(geminiParts(r2.text).map((p) => p.text ?? '').join(''), 'AGENT-DONE');
    const tool = lastUpstream().body.messages.find((m: any) => m.role === 'tool');
    assert.match(tool.content, /Successfully created and wrote to new file/);
    assert.equal(tool.tool_call_id, second.body.contents.at(-1).parts[0].functionResponse.id, 'the call and its response paired by the client’s id');
    await w.settled(t, b0, c0);
  });

  test('forwarded to a Google upstream: the body as sent, the upstream’s model id in the path; cached content priced by the catalog', async () => {
    const t = await w.user('gemini-cli-forwarded');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    for (const req of GEMINI_CLI_GOOGLE.requests) {
      const r = await replayGemini(t, req, 'gemini-2.5-flash');
      assert.equal(r.status, 200, r.text);
      const up = w.gemini.requests.at(-1)!;
      assert.deepEqual([up.path, up.query.alt], ['/v1beta/models/gemini-2.5-flash:streamGenerateContent', 'sse']);
      assert.deepEqual(up.body, req.body, 'untouched');
    }
    const records = await w.settled(t, b0, c0);
    assert.ok(records.every((r) => r.mode === 'gemini' && r.cached_tokens === 3), JSON.stringify(records));
  });
});

describe('@google/genai 3.3.0 (its default API version, v1)', () => {
  before(() => {
    w.stub.plan = (tools) => (tools.includes('get_weather') ? { name: 'get_weather', args: { city: 'Paris' } } : null);
    w.gemini.plan = w.stub.plan;
  });
  after(() => {
    w.gemini.plan = undefined;
  });

  for (const [label, model] of [
    ['translated', 'gpt-4o-mini'],
    ['forwarded', 'gemini-2.5-flash'],
  ] as const) {
    test(`a function-calling loop, plain then streamed, ${label}`, async () => {
      const t = await w.user(`genai-${label}`);
      const b0 = await w.balance(t);
      const c0 = upstreamCalls(w);
      for (const req of GENAI.requests) {
        const r = await replayGemini(t, req, model);
        assert.equal(r.status, 200, r.text);
        const parts = req.path.includes('alt=sse') ? geminiParts(r.text) : JSON.parse(r.text).candidates[0].content.parts;
        const answered = req.body.contents.some((c: any) => c.parts.some((p: any) => p.functionResponse));
        if (answered) assert.equal(parts.map((p: any) => p.text ?? '').join(''), 'AGENT-DONE');
        else assert.deepEqual(parts.find((p: any) => p.functionCall).functionCall.args, { city: 'Paris' });
      }
      await w.settled(t, b0, c0);
    });
  }
});

describe('Claude Code 2.1.332 (the newest), forwarded and translated', () => {
  before(() => {
    w.stub.plan = (tools) => (tools.includes('Write') ? { name: 'Write', args: { file_path: '/home/user/project/hello2.txt', content: 'hello' } } : null);
  });

  test('forwarded: the body and its betas as sent (model aside); translated: tool call then the final answer; charged exactly', async () => {
    const t = await w.user('cc-latest');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    for (const req of CLAUDE_LATEST.requests) {
      const r = await replay(t, req, 'fwd-sonnet');
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(without(lastUpstream().body, 'model'), without(req.body, 'model'));
      assert.equal(lastUpstream().headers['anthropic-beta'], req.headers['anthropic-beta']);
    }
    const [first, second] = CLAUDE_LATEST.requests;
    const r1 = await replay(t, first, 'gpt-4o-mini');
    assert.equal(r1.status, 200, r1.text);
    assert.equal(sseEvents(r1.text).find((e) => e.event === 'content_block_start' && e.data.content_block.type === 'tool_use')?.data.content_block.name, 'Write');
    const r2 = await replay(t, second, 'gpt-4o-mini');
    assert.equal(sseEvents(r2.text).filter((e) => e.data.delta?.type === 'text_delta').map((e) => e.data.delta.text).join(''), 'AGENT-DONE');
    await w.settled(t, b0, c0);
  });
});

describe('Codex CLI 0.171.0 over WebSocket (built-in OpenAI provider), a session that compacts', () => {
  before(() => {
    w.stub.plan = (tools) => (tools.includes('exec_command') ? { name: 'exec_command', args: { cmd: 'echo hello > hello.txt' } } : null);
  });

  for (const [label, model] of [
    ['translated', 'gpt-4o-mini'],
    ['forwarded', 'gpt-4.1-mini'],
  ] as const) {
    test(`${label}: the warm-up, the turns continued by previous_response_id, the compaction and the turn after it, on one socket; charged exactly`, async () => {
      const t = await w.user(`codex-ws-${label}`);
      const b0 = await w.balance(t);
      const c0 = upstreamCalls(w);
      const k0 = w.stub.compactions;
      const ws = new WebSocket(`${w.gw.url.replace(/^http/, 'ws')}/v1/responses`, { headers: { ...CODEX_WS.messages[0].headers, authorization: `Bearer ${t}` } });
      const events: any[] = [];
      const waiters: (() => void)[] = [];
      ws.on('message', (d) => {
        events.push(JSON.parse(String(d)));
        for (const f of waiters.splice(0)) f();
      });
      await new Promise((r, j) => ws.once('open', r).once('error', j));
      const turn = (ev: any) => {
        const from = events.length;
        ws.send(JSON.stringify(ev));
        return new Promise<any[]>((resolve) => {
          const look = () => {
            const end = events.slice(from).findIndex((e) => ['response.completed', 'response.failed', 'error'].includes(e.type));
            if (end === -1) return void waiters.push(look);
            resolve(events.slice(from, from + end + 1));
          };
          look();
        });
      };
      let last: any = null;
      let compaction: any = null;
      const outputs: any[][] = [];
      for (const { event } of CODEX_WS.messages) {
        // the client sends back what this gateway gave it: the last response's id, the call's id, the compaction item
        const ev = { ...event, model, ...(event.previous_response_id ? { previous_response_id: last.id } : {}) };
        const call = outputs.flat().findLast((o) => o.type === 'function_call');
        if (Array.isArray(ev.input)) ev.input = ev.input.map((i: any) => (i.type === 'compaction' ? compaction : i.type === 'function_call_output' ? { ...i, call_id: call.call_id } : i));
        const got = await turn(ev);
        assert.equal(got.at(-1).type, 'response.completed', JSON.stringify(got.at(-1)));
        last = got.at(-1).response;
        outputs.push(last.output);
        compaction = last.output.find((o: any) => o.type === 'compaction') ?? compaction;
      }
      ws.close();
      assert.deepEqual(outputs[0], [], 'the warm-up generates nothing');
      assert.equal(outputs[1][0].type, 'function_call');
      assert.deepEqual(outputs[2].map((o) => o.type), ['compaction'], 'exactly one compaction item');
      assert.match(compaction.encrypted_content, label === 'translated' ? /^cgcmp1\./ : /^oa-cmp:/);
      assert.equal(outputs[3][0].content[0].text, 'AGENT-DONE', 'the turn after the compaction');
      assert.equal(w.stub.compactions - k0, 1);
      const ups = w.stub.requests.slice(-3).map((r) => JSON.stringify(r.body));
      assert.match(ups[1], /exec_command/, 'the compaction sees the whole conversation (the tool call and its output)');
      if (label === 'forwarded') assert.ok(ups[2].includes(compaction.encrypted_content), 'OpenAI’s item passed back untouched');
      else assert.match(ups[2], /Summary of the conversation so far/);

      // three upstream calls, one free warm-up record, Σ credits = the balance drop
      const calls = upstreamCalls(w) - c0;
      assert.equal(calls, 3);
      const u = client(w.gw.url, t);
      let recs: any[] = [];
      for (const end = Date.now() + 30_000; Date.now() < end; await sleep(25)) {
        recs = (await u.get('/v1/usage/me?limit=100')).body.items ?? [];
        if (recs.length >= 4 && b0 - (await w.balance(t)) === recs.reduce((a, r) => a + r.credits, 0)) break;
      }
      assert.equal(recs.length, 4, JSON.stringify(recs.map((r) => [r.credits, r.note])));
      assert.deepEqual(recs.filter((r) => r.credits === 0).map((r) => r.note), ['warm-up (generate: false): no model call']);
      assert.equal(b0 - (await w.balance(t)), recs.reduce((a, r) => a + r.credits, 0));
    });
  }
});
