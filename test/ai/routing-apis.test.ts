// Routing of the client APIs (issue 14): embeddings, the Responses API and the Messages API go
// through the same routing as chat/completions. For each (JSON and stream, forwarded to an
// upstream that speaks the API and translated onto chat/completions), a first upstream that
// fails (503 or a dropped connection) and a second that answers: the official client gets the
// answer, the usage record names the second upstream with attempts = 2, the failing one cools
// down, and the user is charged once, exactly the answer's usage. An upstream 4xx is not retried.
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startAnthropicStub, type AnthropicStub } from '../stubs/anthropic.ts';
import { startOpenAIStub, stubVector, type OpenAIStub } from '../stubs/openai.ts';
import { RICH_USERS, tokenFor } from './setup.ts';

const KEYS = ['sk-apis-alpha-SECRET-1111', 'sk-apis-bravo-SECRET-2222'];
const EMBED = 'openai/text-embedding-3-small';
const GPT = 'openai/gpt-4.1-mini';
const CLAUDE = 'anthropic/claude-sonnet-4-5';
/** A model that only ai_upstreams rows name. */
const TABLE_ONLY = 'apis-table-only-chat';
/** 1 credit per input token, 2 per output token. */
const PRICE = { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 };
const cost = (input: number, output: number) => input + 2 * output;

let openai: OpenAIStub[];
let claude: AnthropicStub[];
let gw: TestGateway;
let admin: ReturnType<typeof client>;
let n = 0;

before(async () => {
  openai = await Promise.all(KEYS.map((apiKey) => startOpenAIStub({ apiKey, responsesApi: true })));
  claude = await Promise.all(KEYS.map((apiKey) => startAnthropicStub({ apiKey })));
  gw = await startGateway({
    env: {
      ...RICH_USERS,
      // one failure opens the circuit (and it stays open through the test)
      AI_COOLDOWN_FAILURES: '1',
      AI_COOLDOWN_MS: '600000',
      AI_RETRY_BACKOFF_MS: '10',
      MODEL_PRICES: JSON.stringify({ [EMBED]: PRICE, [GPT]: PRICE, [CLAUDE]: PRICE, [TABLE_ONLY]: PRICE }),
    },
  });
  admin = client(gw.url, gw.adminKey);
});
after(async () => {
  await gw?.stop();
  await Promise.all([...(openai ?? []), ...(claude ?? [])].map((s) => s.close()));
});

type Kind = 'openai' | 'openai-compatible' | 'anthropic';

/** Two upstreams of one kind for one model: the first (priority 0) on stub 0, the second on stub 1. */
async function pair(kind: Kind, model: string, upstreamModel: string): Promise<[string, string]> {
  const ids: string[] = [];
  for (const i of [0, 1]) {
    const base_url = kind === 'anthropic' ? claude[i].url : openai[i].url;
    const r = await admin.post('/v1/ai/upstreams/create', { name: `${kind}-${i}`, kind, base_url, api_key: KEYS[i], models: [{ id: model, upstream_model: upstreamModel }], priority: i });
    assert.equal(r.status, 200, r.text);
    ids.push(r.body.upstream_id);
  }
  return ids as [string, string];
}

async function unpair(ids: string[]) {
  for (const id of ids) assert.equal((await admin.post('/v1/ai/upstreams/remove', { upstream_id: id })).status, 200);
  for (const s of [...openai, ...claude]) s.setFault(null);
  for (const s of openai) s.reset();
}

/** A fresh user (own city) and what the tests read of them. */
async function user() {
  const token = await tokenFor(admin, `apis-route-${++n}`, `u${n}`);
  const me = client(gw.url, token);
  const balance = async () => (await me.get('/v1/balance/me')).body.credits as number;
  return {
    token,
    balance,
    b0: await balance(),
    /** The user's usage records once `want` exist (and no more appear for a moment). */
    records: (want: number) => until(`${want} usage records`, async () => ((await me.get('/v1/usage/me')).body.items?.length >= want ? (await me.get('/v1/usage/me')).body.items : null)),
  };
}

/** The state routing shows for an upstream and model ('cooling_down' after a failure here). */
async function stateOf(upstreamId: string, model: string): Promise<string | undefined> {
  const list = await admin.get('/v1/ai/upstreams/list');
  return list.body.items.find((u: any) => u.upstream_id === upstreamId)?.state?.[model];
}

/** The shared checks: one record, on the second upstream after 2 attempts, charged once its usage. */
async function servedBySecond(u: Awaited<ReturnType<typeof user>>, ids: [string, string], model: string, mode: string, input: number, output: number) {
  const recs = await u.records(1);
  assert.equal(recs.length, 1, `one usage record: ${JSON.stringify(recs)}`);
  const [rec] = recs;
  assert.deepEqual([rec.mode, rec.status, rec.upstream, rec.attempts], [mode, 'ok', ids[1], 2], JSON.stringify(rec));
  assert.deepEqual([rec.input_tokens, rec.output_tokens, rec.credits], [input, output, cost(input, output)], JSON.stringify(rec));
  await until('the charge to settle', async () => (await u.balance()) === u.b0 - cost(input, output));
  assert.equal((await u.records(1)).length, 1, 'still one record');
  assert.equal(await stateOf(ids[0], model), 'cooling_down', 'the failing upstream cools down');
  assert.equal(await stateOf(ids[1], model), undefined);
}

const openaiFor = (token: string) => new OpenAI({ baseURL: `${gw.url}/v1/ai`, apiKey: token, maxRetries: 0 });
const anthropicFor = (token: string) => new Anthropic({ baseURL: `${gw.url}/v1/ai`, authToken: token, maxRetries: 0 });
const posts = (s: OpenAIStub, path: string) => s.requests.filter((q) => q.method === 'POST' && q.path === path).length;

describe('embeddings fall back', () => {
  test('a 503 then an answer: the openai client gets the vectors; second upstream, attempts 2, charged once', async () => {
    const ids = await pair('openai-compatible', EMBED, 'text-embedding-3-small');
    openai[0].setFault({ status: 503 });
    const u = await user();
    const r = await openaiFor(u.token).embeddings.create({ model: EMBED, input: ['hello world', 'one two three'] });
    assert.deepEqual(r.data[1].embedding, stubVector('one two three', 1536));
    assert.equal(openai[0].faulted, 1);
    assert.equal(posts(openai[1], '/v1/embeddings'), 1);
    await servedBySecond(u, ids, EMBED, 'embeddings', r.usage.prompt_tokens, 0);
    await unpair(ids);
  });
});

describe('the Responses API falls back', () => {
  for (const kind of ['openai', 'openai-compatible'] as const) {
    const how = kind === 'openai' ? 'forwarded' : 'translated';
    test(`${how}, JSON: a dropped connection then an answer`, async () => {
      const ids = await pair(kind, GPT, 'gpt-4.1-mini');
      openai[0].setFault({ drop: true });
      const u = await user();
      const r = await openaiFor(u.token).responses.create({ model: GPT, input: 'hello there' });
      assert.match(r.output_text, /hello there/);
      assert.equal(openai[0].faulted, 1);
      assert.equal(posts(openai[1], kind === 'openai' ? '/v1/responses' : '/v1/chat/completions'), 1);
      await servedBySecond(u, ids, GPT, 'responses', r.usage!.input_tokens, r.usage!.output_tokens);
      await unpair(ids);
    });

    test(`${how}, stream: a 503 then an answer, output_text deltas and response.completed`, async () => {
      const ids = await pair(kind, GPT, 'gpt-4.1-mini');
      openai[0].setFault({ status: 503 });
      const u = await user();
      const s = await openaiFor(u.token).responses.create({ model: GPT, input: 'one two three', stream: true });
      let text = '';
      let done: OpenAI.Responses.Response | undefined;
      for await (const ev of s) {
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.completed') done = ev.response;
      }
      assert.match(text, /one two three/);
      assert.ok(done?.usage, 'response.completed carries usage');
      assert.equal(openai[0].faulted, 1);
      await servedBySecond(u, ids, GPT, 'responses', done.usage.input_tokens, done.usage.output_tokens);
      await unpair(ids);
    });
  }
});

describe('the Messages API falls back', () => {
  for (const kind of ['anthropic', 'openai-compatible'] as const) {
    const how = kind === 'anthropic' ? 'forwarded' : 'translated';
    const model = kind === 'anthropic' ? CLAUDE : GPT;
    const upstreamModel = kind === 'anthropic' ? 'claude-sonnet-4-5' : 'gpt-4.1-mini';
    const fail = (f: { status?: number; drop?: boolean }) => (kind === 'anthropic' ? claude[0].setFault(f) : openai[0].setFault(f));
    const faulted = () => (kind === 'anthropic' ? claude[0].faulted : openai[0].faulted);

    test(`${how}, JSON: a 503 then an answer`, async () => {
      const ids = await pair(kind, model, upstreamModel);
      const f0 = faulted();
      fail({ status: 503 });
      const u = await user();
      const m = await anthropicFor(u.token).messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hello there' }] });
      assert.match(m.content.map((b) => (b.type === 'text' ? b.text : '')).join(''), /hello there/);
      assert.equal(faulted() - f0, 1, 'the first upstream was tried once');
      await servedBySecond(u, ids, model, 'messages', m.usage.input_tokens, m.usage.output_tokens);
      await unpair(ids);
    });

    test(`${how}, stream: a dropped connection then an answer`, async () => {
      const ids = await pair(kind, model, upstreamModel);
      const f0 = faulted();
      fail({ drop: true });
      const u = await user();
      const s = anthropicFor(u.token).messages.stream({ model, max_tokens: 100, messages: [{ role: 'user', content: 'one two three' }] });
      let text = '';
      s.on('text', (x) => (text += x));
      const m = await s.finalMessage();
      assert.match(text, /one two three/);
      assert.equal(faulted() - f0, 1, 'the first upstream was tried once');
      await servedBySecond(u, ids, model, 'messages', m.usage.input_tokens, m.usage.output_tokens);
      await unpair(ids);
    });
  }
});

describe('a model only ai_upstreams names', () => {
  test('serves the Responses and Messages APIs too, routed', async () => {
    const ids = await pair('openai-compatible', TABLE_ONLY, 'stub-model');
    openai[0].setFault({ status: 503 });
    const u = await user();
    const r = await openaiFor(u.token).responses.create({ model: TABLE_ONLY, input: 'hello there' });
    assert.match(r.output_text, /hello there/);
    const m = await anthropicFor(u.token).messages.create({ model: TABLE_ONLY, max_tokens: 100, messages: [{ role: 'user', content: 'hello there' }] });
    assert.equal(m.type, 'message');
    const recs = await u.records(2);
    assert.deepEqual(recs.map((x: any) => [x.mode, x.status, x.upstream]).sort(), [['messages', 'ok', ids[1]], ['responses', 'ok', ids[1]]]);
    await unpair(ids);
  });
});

describe('a stream broken after its first byte', () => {
  test('is not retried (Messages, forwarded): the client gets an error event; charged once, what the upstream reported', async () => {
    const ids = await pair('anthropic', CLAUDE, 'claude-sonnet-4-5');
    claude[0].setFault({ breakStream: true });
    const before = claude[1].messageCalls;
    const u = await user();
    const s = anthropicFor(u.token).messages.stream({ model: CLAUDE, max_tokens: 100, messages: [{ role: 'user', content: 'one two three' }] });
    let text = '';
    s.on('text', (x) => (text += x));
    await assert.rejects(s.finalMessage(), (err: unknown) => {
      assert.match(String(err), /api_error|upstream_stream_failed|broke off/, String(err));
      return true;
    });
    assert.equal(text, 'Hello', 'the first bytes reached the client');
    assert.equal(claude[1].messageCalls, before, 'no fallback once the stream began');
    const [rec] = await u.records(1);
    assert.deepEqual([rec.status, rec.error_code, rec.upstream, rec.attempts], ['error', 'upstream_stream_failed', ids[0], 1], JSON.stringify(rec));
    // the input the upstream reported (3 + 3 words), one output token per relayed delta
    assert.deepEqual([rec.input_tokens, rec.output_tokens, rec.credits, rec.estimated], [6, 1, cost(6, 1), true], JSON.stringify(rec));
    await until('the charge to settle', async () => (await u.balance()) === u.b0 - cost(6, 1));
    assert.equal((await u.records(1)).length, 1);
    await unpair(ids);
  });
});

describe('an upstream 4xx', () => {
  test('is not retried (embeddings and Messages): the client gets 400, nothing is charged, no cooldown', async () => {
    const e = await pair('openai-compatible', EMBED, 'text-embedding-3-small');
    openai[0].setFault({ status: 400 });
    const u = await user();
    await assert.rejects(openaiFor(u.token).embeddings.create({ model: EMBED, input: 'x y' }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal((err as any).error?.code, 'upstream_rejected');
      return true;
    });
    assert.equal(posts(openai[1], '/v1/embeddings'), 0, 'the second upstream was not called');

    const m = await pair('anthropic', CLAUDE, 'claude-sonnet-4-5');
    claude[0].setFault({ status: 400 });
    const before = claude[1].messageCalls;
    await assert.rejects(anthropicFor(u.token).messages.create({ model: CLAUDE, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => {
      assert.ok(err instanceof Anthropic.BadRequestError, String(err));
      assert.equal((err as any).error?.error?.type, 'invalid_request_error');
      return true;
    });
    assert.equal(claude[1].messageCalls, before, 'the second upstream was not called');

    const recs = await u.records(2);
    assert.deepEqual(
      recs.map((r: any) => [r.mode, r.status, r.error_code, r.upstream, r.attempts, r.credits]).sort(),
      [['embeddings', 'error', 'upstream_rejected', e[0], 1, 0], ['messages', 'error', 'upstream_rejected', m[0], 1, 0]],
    );
    assert.equal(await u.balance(), u.b0, 'nothing charged');
    assert.equal(await stateOf(e[0], EMBED), undefined, 'an input error says nothing of the upstream');
    assert.equal(await stateOf(m[0], CLAUDE), undefined);
    await unpair([...e, ...m]);
  });
});
