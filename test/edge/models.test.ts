// Models, prices and margins as data (issue 26) on the edge: the stock Worker in workerd on a
// local D1, with a second isolate on the same D1; the same scenario as test/ai/models-data.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, type Res } from '../helpers/http.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import * as s from '../ai/models-scenario.ts';

let stub: OpenAIStub;
let w: TestWorker;
let t: s.Target;

async function second(method: string, path: string, opts: { token?: string; body?: unknown } = {}): Promise<Res> {
  const headers: Record<string, string> = {};
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await w.second(path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, body, text };
}

before(async () => {
  stub = await startOpenAIStub();
  w = await startWorker({ secondIsolate: true, vars: { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model' } });
  assert.equal((await call(w.url, 'GET', '/health')).status, 200, w.logs());
  t = { url: w.url, adminKey: await w.adminKey(), second, stubUrl: stub.url, upstreamRequests: () => stub.requests as { path: string; body: any }[] };
});
after(async () => {
  await w?.stop();
  await stub?.close();
});

describe('models as data on Workers (D1)', () => {
  test('bad input is a 400 naming the field, and creates nothing', () => s.badInput(t));
  test('a model created through the API serves embeddings to the openai client, charged at the city price', () => s.embeddingsModel(t));
  test('a database model replaces a built-in one of the same id: a TEXTPROVIDER_MODELS model becomes an embeddings model', () => s.replaceBuiltin(t));
  test("a city's prices in the user's catalog", () => s.pricedChatModels(t));
  test("a city's allow-list refuses other models on chat/completions, Responses, Messages and embeddings", () => s.allowList(t));
  test('price_multiplier 1.25 under a 50-way race', () =>
    s.race(t, { city: 'race-mult', settings: { price_multiplier: 1.25 }, model: 'resold', cityPrice: 1250, basePrice: 1000 }));
  test('a per-model override under a 50-way race', () =>
    s.race(t, { city: 'race-over', settings: { price_multiplier: 3, prices: { 'resold-2': { per_request: 700 } } }, model: 'resold-2', cityPrice: 700, basePrice: 1000 }));
  test('an alias is served and recorded', () => s.alias(t));
  test('a change reaches the second isolate within about 2 s', async () => {
    const ms = await s.secondProcess(t);
    console.log(`# second isolate saw the new model after ${ms} ms`);
  });
});
