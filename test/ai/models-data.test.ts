// Models, prices and margins as data (issue 26) on a Node gateway: SQLite here, PostgreSQL when
// the suite runs there (test/postgres/suites.test.ts), with a second gateway process on the same
// database. The scenario itself (models-scenario.ts) runs on the Worker too (test/edge/models.test.ts).
import { after, before, describe, test } from 'node:test';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { call } from '../helpers/http.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import * as s from './models-scenario.ts';

let stub: OpenAIStub;
let gw: TestGateway;
let gw2: TestGateway;
let t: s.Target;

before(async () => {
  stub = await startOpenAIStub();
  const dir = tempDir('citygate-models-');
  const env = { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', USAGE_FLUSH_MS: '20', BALANCE_FLUSH_MS: '20' };
  gw = await startGateway({ dir, env });
  gw2 = await startGateway({ dir, env });
  t = {
    url: gw.url,
    adminKey: gw.adminKey,
    second: (method, path, opts) => call(gw2.url, method, path, opts),
    stubUrl: stub.url,
    upstreamRequests: () => stub.requests as { path: string; body: any }[],
  };
});
after(async () => {
  await gw?.stop();
  await gw2?.stop();
  await stub?.close();
});

describe('models as data', () => {
  test('bad input is a 400 naming the field, and creates nothing', () => s.badInput(t));
  test('a model created through the API serves embeddings to the openai client on an OpenAI-compatible upstream, charged at the city price', () => s.embeddingsModel(t));
  test('a database model replaces a built-in one of the same id: a TEXTPROVIDER_MODELS model becomes an embeddings model', () => s.replaceBuiltin(t));
  test("a city's prices: the user's catalog shows base × multiplier and the override", () => s.pricedChatModels(t));
  test("a city's allow-list refuses other models on chat/completions, Responses, Messages and embeddings", () => s.allowList(t));
  test('price_multiplier 1.25: 50 calls at once on credits for 10, charged exactly 1250 each', () =>
    s.race(t, { city: 'race-mult', settings: { price_multiplier: 1.25 }, model: 'resold', cityPrice: 1250, basePrice: 1000 }));
  test('a per-model override (700, under a multiplier of 3): 50 calls at once on credits for 10, charged exactly 700 each', () =>
    s.race(t, { city: 'race-over', settings: { price_multiplier: 3, prices: { 'resold-2': { per_request: 700 } } }, model: 'resold-2', cityPrice: 700, basePrice: 1000 }));
  test('an alias is served and recorded (model and alias)', () => s.alias(t));
  test('a change through one process reaches a second process on the same database within about 2 s', async () => {
    const ms = await s.secondProcess(t);
    console.log(`# second process saw the new model after ${ms} ms`);
  });
});
