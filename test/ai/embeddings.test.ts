// GET /v1/ai/models as an OpenAI model list and POST /v1/ai/embeddings, through the openai
// package and the AI SDK, against the OpenAI-compatible stub (chat/completions and embeddings
// only); every embedding call charged by the input tokens the upstream reported.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { embedMany } from 'ai';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { client, errorOf } from '../helpers/http.ts';
import { stubVector } from '../stubs/openai.ts';
import { drain, startApiWorld, type ApiWorld } from './apis-setup.ts';

let w: ApiWorld;
before(async () => {
  w = await startApiWorld();
});
after(() => w?.close());

const openaiFor = (token: string) => new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: token, maxRetries: 0 });
const lastEmbeddings = () => [...w.openai.requests].reverse().find((r) => r.path === '/v1/embeddings')!;

describe('models list', () => {
  test('client.models.list() returns exactly the callable models, next to the seed items', async () => {
    const t = await w.user('lister');
    const ids: string[] = [];
    for await (const m of openaiFor(t).models.list()) {
      assert.equal(m.object, 'model');
      assert.equal(typeof m.created, 'number');
      assert.equal(typeof m.owned_by, 'string');
      ids.push(m.id);
    }
    const seed = await client(w.gw.url, t).get('/v1/ai/models');
    assert.deepEqual(ids, seed.body.items.map((m: { id: string }) => m.id));
    for (const id of ['stub-model', 'embed-small', 'claude', 'openai/gpt-4.1', 'openai/text-embedding-3-small']) assert.ok(ids.includes(id), id);
    for (const id of ['google/gemini-2.5-flash', 'anthropic/claude-sonnet-4-5']) assert.ok(!ids.includes(id), `${id} has no key: not callable`);
  });
});

describe('embeddings', () => {
  test('the openai client (base64 by default) gets the upstream vectors; the call is charged its input tokens', async () => {
    const t = await w.user('embedder');
    const b0 = await w.balance(t);
    const r = await openaiFor(t).embeddings.create({ model: 'embed-small', input: ['hello world', 'one two three'] });
    assert.equal(r.data.length, 2);
    assert.deepEqual(r.data[1].embedding, stubVector('one two three', 1536));
    assert.deepEqual([r.usage.prompt_tokens, r.usage.total_tokens], [5, 5]);
    const up = lastEmbeddings();
    assert.equal((up.body as any).model, 'text-embedding-3-small', 'the upstream id goes upstream');
    assert.equal((up.body as any).encoding_format, 'base64', 'passed through as the client asked');
    assert.equal(up.headers.authorization, 'Bearer sk-stub');
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - (5))), 5, '1 credit per input token');
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.mode, rec.status, rec.model, rec.input_tokens, rec.output_tokens, rec.credits], ['embeddings', 'ok', 'embed-small', 5, 0, 5]);
  });

  test('float encoding, token arrays and dimensions pass through; city_id is checked and not sent upstream', async () => {
    const t = await w.user('tokens');
    const r = await openaiFor(t).embeddings.create({ model: 'embed-small', input: [[1, 2, 3], [4, 5]], dimensions: 4, encoding_format: 'float' });
    assert.deepEqual(r.data.map((d) => d.embedding.length), [4, 4]);
    assert.equal(r.usage.prompt_tokens, 5);
    const up = lastEmbeddings().body as any;
    assert.deepEqual([up.input, up.dimensions, up.encoding_format], [[[1, 2, 3], [4, 5]], 4, 'float']);
    const own = await client(w.gw.url, t).post('/v1/ai/embeddings', { model: 'embed-small', input: 'x', city_id: w.owner(t).city });
    assert.equal(own.status, 200);
    assert.equal((lastEmbeddings().body as any).city_id, undefined);
    const other = await client(w.gw.url, t).post('/v1/ai/embeddings', { model: 'embed-small', input: 'x', city_id: 'someone-else' });
    assert.equal(other.status, 403);
    assert.equal(errorOf(other).code, 'city_mismatch');
  });

  test('through the AI SDK: embedMany against citygate, and citygate using embedMany for a translated upstream', async () => {
    const t = await w.user('sdk');
    const b0 = await w.balance(t);
    const cg = createOpenAICompatible({ name: 'citygate', baseURL: `${w.gw.url}/v1/ai`, apiKey: t });
    const viaPass = await embedMany({ model: cg.embeddingModel('embed-small'), values: ['alpha beta', 'gamma'], maxRetries: 0 });
    assert.deepEqual(viaPass.embeddings[0], stubVector('alpha beta', 1536));
    const viaSdk = await embedMany({ model: cg.embeddingModel('embed-sdk'), values: ['alpha beta', 'gamma'], maxRetries: 0 });
    assert.deepEqual(viaSdk.embeddings, viaPass.embeddings, 'same upstream vectors through embedMany');
    assert.equal(viaSdk.usage.tokens, 3);
    const b64 = await openaiFor(t).embeddings.create({ model: 'embed-sdk', input: 'delta epsilon' });
    assert.deepEqual(b64.data[0].embedding, stubVector('delta epsilon', 1536), 'base64 encoded by citygate decodes to the same floats');
    assert.equal(b0 - (await w.balanceBecomes(t, b0 - (3 + 3 + 2))), 3 + 3 + 2);
    const tok = await client(w.gw.url, t).post('/v1/ai/embeddings', { model: 'embed-sdk', input: [1, 2, 3] });
    assert.equal(tok.status, 400);
    assert.equal(errorOf(tok).param, 'input');
    const recs = await w.records(t, 3);
    assert.deepEqual(recs.map((x: any) => [x.mode, x.model, x.credits]).sort(), [['embeddings', 'embed-sdk', 2], ['embeddings', 'embed-sdk', 3], ['embeddings', 'embed-small', 3]]);
  });

  test('a stock OpenAI embedding model goes to the OpenAI slot', async () => {
    const t = await w.user('stock');
    const r = await openaiFor(t).embeddings.create({ model: 'openai/text-embedding-3-small', input: 'x y' });
    assert.equal(r.usage.prompt_tokens, 2);
    assert.equal((w.openaiFull.requests.at(-1)!.body as any).model, 'text-embedding-3-small');
  });

  test('bad input, a chat model, a bad token, and no credits: clear 4xx, the upstream not called', async () => {
    const t = await w.user('broke');
    const calls = w.openai.requestCount;
    const empty = await client(w.gw.url, t).post('/v1/ai/embeddings', { model: 'embed-small', input: [] });
    assert.equal(empty.status, 400);
    assert.equal(errorOf(empty).param, 'input');
    const chat = await client(w.gw.url, t).post('/v1/ai/embeddings', { model: 'stub-model', input: 'x' });
    assert.deepEqual([chat.status, errorOf(chat).code], [400, 'mode_not_supported']);
    await assert.rejects(openaiFor('not-a-token').embeddings.create({ model: 'embed-small', input: 'x' }), (e: unknown) => {
      assert.ok(e instanceof OpenAI.AuthenticationError);
      assert.equal((e as any).error?.code, 'invalid_token');
      return true;
    });
    await drain(w, t);
    await assert.rejects(openaiFor(t).embeddings.create({ model: 'embed-small', input: 'x' }), (e: unknown) => {
      assert.equal((e as InstanceType<typeof OpenAI.APIError>).status, 402);
      return true;
    });
    assert.equal(w.openai.requestCount, calls, 'no upstream call');
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.mode, rec.status, rec.error_code, rec.credits], ['embeddings', 'error', 'insufficient_credits', 0]);
  });
});
