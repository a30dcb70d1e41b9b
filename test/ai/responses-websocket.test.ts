// The Responses API over WebSocket (OpenAI's WebSocket mode) on the Node server, with the `ws`
// client and the `openai` client's ResponsesWS: auth at the upgrade, many response.create turns
// on one socket (the generate: false warm-up, previous_response_id continued by citygate on
// translated and forwarded upstreams alike), each held, charged and recorded exactly once; a
// client that drops mid-turn; the idle timeout; and, last (it stops the file's gateway),
// SIGTERM with a turn in flight.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import WebSocket from 'ws';
import { join } from 'node:path';
import { startNodeServer } from '../../src/runtimes/node/server.ts';
import { tempDir } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { sqlAll } from '../helpers/sql.ts';
import { countWords, promptTokens, startOpenAIStub } from '../stubs/openai.ts';
import { cost, PRICE, startApiWorld, type ApiWorld } from './apis-setup.ts';
import { tokenFor } from './setup.ts';

let w: ApiWorld;
before(async () => {
  // one AI call in flight per user: a socket's turn counts like any call
  w = await startApiWorld({ env: { WS_IDLE_TIMEOUT_MS: '1500', RATE_LIMIT_USER_AI_CALLS: '1' } });
});
after(() => w?.close());

const wsUrl = (path = '/v1/ai/responses') => `${w.gw.url.replace(/^http/, 'ws')}${path}`;
const lastChat = () => [...w.openai.requests].reverse().find((r) => r.path === '/v1/chat/completions')!;
const chatCost = (reply: string) => cost(promptTokens((lastChat().body as any).messages), countWords(reply));
const weather = { type: 'function', name: 'get_weather', description: 'weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };

interface Sock {
  ws: WebSocket;
  events: any[];
  /** Sends one response.create and resolves with its events, up to the final one (completed, incomplete, failed or error). */
  turn(body: object): Promise<any[]>;
  /** Resolves once an event of this type arrived (after `from`). */
  until(type: string, from?: number): Promise<any>;
  closed: Promise<{ code: number; reason: string }>;
}

function open(token: string, path?: string): Promise<Sock> {
  const ws = new WebSocket(wsUrl(path), { headers: { authorization: `Bearer ${token}` } });
  const events: any[] = [];
  const waiters: (() => void)[] = [];
  ws.on('message', (d) => {
    events.push(JSON.parse(String(d)));
    for (const f of waiters.splice(0)) f();
  });
  const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: String(reason) })));
  const until = (type: string, from = 0) =>
    new Promise<any>((resolve, reject) => {
      const look = () => {
        const hit = events.slice(from).find((e) => e.type === type);
        if (hit) return resolve(hit);
        if (ws.readyState >= WebSocket.CLOSING) return reject(new Error(`socket closed before ${type}: ${JSON.stringify(events.slice(from))}`));
        waiters.push(look);
      };
      look();
    });
  const s: Sock = {
    ws,
    events,
    closed,
    until,
    async turn(body) {
      const from = events.length;
      ws.send(JSON.stringify({ type: 'response.create', ...body }));
      return new Promise((resolve, reject) => {
        const look = () => {
          const end = events.slice(from).findIndex((e) => ['response.completed', 'response.incomplete', 'response.failed', 'error'].includes(e.type));
          if (end !== -1) return resolve(events.slice(from, from + end + 1));
          if (ws.readyState >= WebSocket.CLOSING) return reject(new Error(`socket closed mid-turn: ${JSON.stringify(events.slice(from))}`));
          waiters.push(look);
        };
        look();
      });
    },
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(s));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode} ${body}`), { status: res.statusCode, body: JSON.parse(body || '{}') })));
    });
    ws.once('error', reject);
  });
}

const final = (events: any[]) => events.at(-1);

describe('Responses over WebSocket', () => {
  test('3 turns on one socket, continued by previous_response_id on a translated upstream: the whole conversation upstream each time, each turn charged once', async () => {
    const t = await w.user('ws-three');
    const b0 = await w.balance(t);
    const s = await open(t);
    const costs: number[] = [];

    const e1 = await s.turn({ model: 'stub-model', tools: [weather], input: 'Paris' });
    const r1 = final(e1).response;
    assert.equal(final(e1).type, 'response.completed', JSON.stringify(final(e1)));
    const fc = r1.output.find((o: any) => o.type === 'function_call');
    assert.deepEqual([fc.name, JSON.parse(fc.arguments)], ['get_weather', { city: 'Paris' }]);
    costs.push(cost(promptTokens((lastChat().body as any).messages), r1.usage.output_tokens));

    const e2 = await s.turn({ model: 'stub-model', tools: [weather], previous_response_id: r1.id, input: [{ type: 'function_call_output', call_id: fc.call_id, output: 'sunny 21C' }] });
    const r2 = final(e2).response;
    assert.equal(r2.output[0].content[0].text, 'Tool result received: sunny 21C');
    assert.deepEqual((lastChat().body as any).messages.map((m: any) => m.role), ['user', 'assistant', 'tool']);
    costs.push(chatCost('Tool result received: sunny 21C'));

    const e3 = await s.turn({ model: 'stub-model', previous_response_id: r2.id, input: 'thanks a lot' });
    const r3 = final(e3).response;
    assert.equal(r3.output[0].content[0].text, 'Hello from stub: thanks a lot');
    assert.deepEqual((lastChat().body as any).messages.map((m: any) => m.role), ['user', 'assistant', 'tool', 'assistant', 'user']);
    costs.push(chatCost('Hello from stub: thanks a lot'));
    assert.deepEqual(e3.map((e) => e.sequence_number), e3.map((_, i) => i), 'each turn numbers its events from 0');

    const want = costs.reduce((a, b) => a + b, 0);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - want)), want, 'Σ charges = the three turns');
    const recs = await w.records(t, 3);
    assert.deepEqual(recs.map((r: any) => [r.mode, r.status, r.credits]).reverse(), costs.map((c) => ['responses', 'ok', c]));
    s.ws.close();
  });

  test('the generate: false warm-up (as Codex opens) is answered without a model call and recorded free; the next turn forwarded to OpenAI carries the whole conversation', async () => {
    const t = await w.user('ws-warm');
    const b0 = await w.balance(t);
    const s = await open(t, '/v1/responses'); // Codex's path on a base URL of {base}/v1
    const calls = w.openaiFull.requestCount;
    const e0 = await s.turn({ model: 'openai/gpt-4.1-mini', instructions: 'be brief', input: [{ type: 'message', role: 'developer', content: 'rules' }], generate: false });
    assert.deepEqual(e0.map((e) => e.type), ['response.created', 'response.completed']);
    const warm = final(e0).response;
    assert.deepEqual([warm.output, warm.usage.input_tokens, warm.usage.output_tokens], [[], 0, 0]);
    assert.equal(w.openaiFull.requestCount, calls, 'no upstream call');
    const [rec0] = await w.records(t, 1);
    assert.deepEqual([rec0.status, rec0.credits, rec0.input_tokens], ['ok', 0, 0]);
    assert.match(rec0.note, /warm-up/);

    const e1 = await s.turn({ model: 'openai/gpt-4.1-mini', instructions: 'be brief', previous_response_id: warm.id, input: 'hello there' });
    const r1 = final(e1).response;
    assert.equal(r1.output[0].content[0].text, 'Hello from stub: hello there');
    const up = [...w.openaiFull.requests].reverse().find((r) => r.path === '/v1/responses')!.body as any;
    assert.deepEqual(up.input, [{ type: 'message', role: 'developer', content: 'rules' }, { type: 'message', role: 'user', content: 'hello there' }]);
    assert.deepEqual([up.previous_response_id, up.store, up.stream, up.generate], [undefined, false, true, undefined]);
    const want = cost(r1.usage.input_tokens, r1.usage.output_tokens);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - want)), want);
    assert.equal((await w.records(t, 2)).length, 2);
    s.ws.close();
  });

  test('an unknown previous_response_id is an error event (previous_response_not_found) and the socket serves on; bad input an error event with the field', async () => {
    const t = await w.user('ws-prev');
    const s = await open(t);
    const [err] = await s.turn({ model: 'stub-model', previous_response_id: 'resp_nope', input: 'x' });
    assert.deepEqual([err.type, err.status, err.error.code, err.error.param], ['error', 400, 'previous_response_not_found', 'previous_response_id']);
    const [bad] = await s.turn({ model: 'stub-model', input: 'x', temperature: 7 });
    assert.deepEqual([bad.type, bad.status, bad.error.param], ['error', 400, 'temperature']);
    const ok = await s.turn({ model: 'stub-model', input: 'still here' });
    assert.equal(final(ok).type, 'response.completed');
    s.ws.close();
  });

  test('the openai client’s ResponsesWS: a turn and its continuation, charged exactly', async () => {
    const t = await w.user('ws-sdk');
    const b0 = await w.balance(t);
    const rws = new ResponsesWS(new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: t, maxRetries: 0 }));
    const done = () => new Promise<any>((resolve, reject) => {
      rws.once('response.completed', (e: any) => resolve(e.response));
      rws.once('error', reject);
    });
    let p = done();
    rws.send({ type: 'response.create', model: 'stub-model', input: 'first words' } as any);
    const r1 = await p;
    p = done();
    rws.send({ type: 'response.create', model: 'stub-model', previous_response_id: r1.id, input: 'second words' } as any);
    const r2 = await p;
    assert.equal(r2.output[0].content[0].text, 'Hello from stub: second words');
    const want = cost(r1.usage.input_tokens, r1.usage.output_tokens) + cost(r2.usage.input_tokens, r2.usage.output_tokens);
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - want)), want);
    rws.close();
  });

  test('no valid token: refused at the upgrade, 401 in the one error shape; a plain GET is still 405', async () => {
    await assert.rejects(open('not-a-token'), (e: any) => e.status === 401 && e.body.error.code === 'invalid_token');
    await assert.rejects(
      new Promise((resolve, reject) => {
        const ws = new WebSocket(wsUrl());
        ws.once('open', resolve);
        ws.once('unexpected-response', (_q, res) => reject(Object.assign(new Error('refused'), { status: res.statusCode })));
      }),
      (e: any) => e.status === 401,
    );
    const get = await fetch(`${w.gw.url}/v1/ai/responses`);
    assert.equal(get.status, 405);
  });

  test('a client that drops mid-turn: one record, aborted, charged by the estimate rules, once', async () => {
    const t = await w.user('ws-drop');
    const b0 = await w.balance(t);
    const s = await open(t);
    const body = { model: 'stub-stream-slow', input: 'one two three four five six' };
    s.ws.send(JSON.stringify({ type: 'response.create', ...body }));
    await s.until('response.output_text.delta');
    s.ws.terminate();
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.status, rec.estimated, rec.error_code], ['aborted', true, 'client_closed_request']);
    // the estimate: the turn's request body at ~4 bytes a token, one output token per piece relayed
    assert.equal(rec.input_tokens, Math.ceil(Buffer.byteLength(JSON.stringify({ ...body, stream: true })) / 4));
    assert.ok(rec.output_tokens >= 1 && rec.output_tokens < 20, `pieces relayed: ${rec.output_tokens}`);
    assert.equal(rec.credits, cost(rec.input_tokens, rec.output_tokens));
    assert.equal(await w.balanceBecomes(t, b0 - rec.credits), b0 - rec.credits);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await w.records(t, 1)).length, 1, 'one record');
    assert.equal(await w.balance(t), b0 - rec.credits, 'charged once');
  });

  test('a turn in flight counts against the user’s concurrency cap (RATE_LIMIT_USER_AI_CALLS=1): another socket’s turn meanwhile is a 429 error event, free; after it, served', async () => {
    const t = await w.user('ws-cap');
    const a = await open(t);
    const b = await open(t);
    const slow = a.turn({ model: 'stub-stream-slow', input: 'x' });
    await a.until('response.output_text.delta');
    const [refused] = await b.turn({ model: 'stub-model', input: 'meanwhile' });
    assert.deepEqual([refused.type, refused.status, refused.error.code], ['error', 429, 'rate_limited']);
    assert.equal(final(await slow).type, 'response.completed');
    // on a new socket: b sat idle while a's turn streamed, and on a loaded machine that can
    // outlast WS_IDLE_TIMEOUT_MS (b closed, by design)
    const c = await open(t);
    assert.equal(final(await c.turn({ model: 'stub-model', input: 'after' })).type, 'response.completed');
    const recs = await w.records(t, 2);
    assert.deepEqual(recs.map((r: any) => r.status).sort(), ['ok', 'ok']);
    for (const s of [a, b, c]) s.ws.close();
  });

  test('an idle socket is closed after WS_IDLE_TIMEOUT_MS (code 1000)', async () => {
    const t = await w.user('ws-idle');
    const t0 = Date.now(); // before the upgrade: the server's idle clock starts after it, the client may see the open late
    const s = await open(t);
    const { code, reason } = await s.closed;
    assert.deepEqual([code, reason], [1000, 'idle timeout']);
    assert.ok(Date.now() - t0 >= 1400, `closed after ${Date.now() - t0} ms`);
  });

  // last: it stops the file's gateway
  test('SIGTERM with a turn in flight: the turn finishes, then the socket closes with 1001; exit 0; the money exact', async () => {
    const t = await w.user('ws-sigterm');
    const b0 = await w.balance(t);
    const s = await open(t);
    const idle = await open(t);
    const turn = s.turn({ model: 'stub-stream-slow', input: 'a b c d e f g h' });
    await s.until('response.output_text.delta');
    const stopped = w.gw.stop('SIGTERM');
    assert.deepEqual(await idle.closed, { code: 1001, reason: 'server shutting down' }, 'an idle socket closes at once');
    const events = await turn;
    assert.equal(final(events).type, 'response.completed', JSON.stringify(final(events)));
    const r = final(events).response;
    assert.equal(r.output[0].content[0].text, Array.from({ length: 20 }, (_, i) => `w${i + 1}`).join(' '), 'the whole answer');
    assert.deepEqual(await s.closed, { code: 1001, reason: 'server shutting down' });
    assert.equal(await stopped, 0, `exit code; stderr:\n${w.gw.stderr().slice(-1500)}`);
    const { city, user } = w.owner(t);
    const recs = await sqlAll<{ credits: number; status: string }>(w.gw, 'SELECT credits, status FROM usage WHERE city_id = ? AND user_id = ?', [city, user]);
    const [bal] = await sqlAll<{ credits: number }>(w.gw, 'SELECT credits FROM balances WHERE city_id = ? AND user_id = ?', [city, user]);
    const want = cost(r.usage.input_tokens, r.usage.output_tokens);
    assert.deepEqual(recs.map((r) => [r.credits, r.status]), [[want, 'ok']]);
    assert.equal(b0 - bal.credits, want);
  });
});

describe('Responses over WebSocket: a drain whose deadline passes', () => {
  test('SIGTERM with a turn longer than SHUTDOWN_TIMEOUT_MS: the turn ends with its error event, charged by the estimate, the socket closes 1001, all within the deadline', async () => {
    const stub = await startOpenAIStub({ streamSlowMs: 500 }); // 20 chunks: 10 s
    const dir = tempDir('citygate-ws-deadline-');
    const key = 'ws-deadline-admin-key-0123456789abcdef';
    const s = await startNodeServer(
      {
        ...process.env,
        HOST: '127.0.0.1',
        PORT: '0',
        DATABASE_PATH: join(dir, 'c.sqlite'),
        DATABASE_URL: '',
        GATEWAY_ADMIN_SECRET_KEY: key,
        SHUTDOWN_TIMEOUT_MS: '1000',
        TEXTPROVIDER_API_KEY: 'sk-stub',
        TEXTPROVIDER_BASE_URL: stub.url,
        TEXTPROVIDER_MODELS: 'stub-stream-slow',
        MODEL_PRICES: JSON.stringify({ 'stub-stream-slow': PRICE }),
        BALANCE_INITIAL_CREDITS: '1000000',
      },
      { logger: () => {} },
    );
    try {
      const t = await tokenFor(client(s.url, key), 'ws-deadline', 'u');
      const ws = new WebSocket(`${s.url.replace(/^http/, 'ws')}/v1/ai/responses`, { headers: { authorization: `Bearer ${t}` } });
      const events: any[] = [];
      const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
      const first = new Promise<void>((r) => ws.on('message', (d) => (events.push(JSON.parse(String(d))), events.at(-1).type === 'response.output_text.delta' && r())));
      await new Promise((r, j) => ws.once('open', r).once('error', j));
      ws.send(JSON.stringify({ type: 'response.create', model: 'stub-stream-slow', input: 'go' }));
      await first;
      const t0 = Date.now();
      await s.stop();
      const took = Date.now() - t0;
      assert.equal(await closed, 1001);
      assert.ok(took < 1000 + 3500, `stopped in ${took} ms`);
      assert.equal(events.at(-1).type, 'error', JSON.stringify(events.at(-1)));
      assert.equal(events.some((e) => e.type === 'response.completed'), false);
      const recs = await sqlAll<{ credits: number; status: string; estimated: number; input_tokens: number; output_tokens: number }>({ dbPath: join(dir, 'c.sqlite') }, 'SELECT credits, status, estimated, input_tokens, output_tokens FROM usage');
      assert.equal(recs.length, 1);
      assert.equal(recs[0].estimated, 1);
      assert.equal(recs[0].credits, cost(recs[0].input_tokens, recs[0].output_tokens));
      const [bal] = await sqlAll<{ credits: number }>({ dbPath: join(dir, 'c.sqlite') }, "SELECT credits FROM balances WHERE city_id = 'ws-deadline' AND user_id = 'u'");
      assert.equal(1_000_000 - bal.credits, recs[0].credits, 'charged the estimate, once');
    } finally {
      await s.stop();
      await stub.close();
    }
  });
});
