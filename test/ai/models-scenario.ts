// Models, prices and margins as data (issue 26), as an operator and a product's users see them
// through the API, on any deployment: a Node gateway (SQLite or PostgreSQL) or the Worker on D1.
// `Target` is the deployment: its URL, a second process (or isolate) on the same database, and
// the OpenAI-compatible stub upstream.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { call, client, errorOf, type Res } from '../helpers/http.ts';
import { sleep, until } from '../helpers/wait.ts';

export interface Target {
  url: string;
  adminKey: string;
  /** The same call on a second process or isolate on the same database. */
  second(method: string, path: string, opts?: { token?: string; body?: unknown }): Promise<Res>;
  stubUrl: string;
  /** The stub's requests (path and body), to see what reached the upstream. */
  upstreamRequests(): { path: string; body: any }[];
}

type Client = ReturnType<typeof client>;

export async function cityUser(admin: Client, city: string, user: string): Promise<string> {
  const c = await admin.post('/v1/cities/create', { name: city, city_id: city });
  assert.ok(c.status === 200 || c.status === 409, c.text);
  const token = (await admin.post('/v1/cities/tokens/apply', { city_id: city, user_id: user })).body.user_token as string;
  assert.ok(token, 'token');
  return token;
}

/** Sets a user's balance to exactly `credits`. */
export async function fund(t: Target, city: string, user: string, credits: number): Promise<string> {
  const admin = client(t.url, t.adminKey);
  const token = await cityUser(admin, city, user);
  const now = (await client(t.url, token).get('/v1/balance/me')).body.credits as number;
  if (now === credits) return token;
  const r = await admin.post('/v1/balance/adjust', { city_id: city, user_id: user, credits: credits - now, reason: 'test', idempotency_key: `fund-${city}-${user}` });
  assert.equal(r.status, 200, r.text);
  return token;
}

/** The city's usage records once `n` exist (usage is written off the request path). */
export async function records(t: Target, city: string, n: number): Promise<any[]> {
  const admin = client(t.url, t.adminKey);
  let items: any[] = [];
  await until(`${n} usage records of ${city}`, async () => {
    items = (await admin.get(`/v1/usage/list?city_id=${city}&limit=200`)).body.items ?? [];
    return items.length >= n;
  }, 15_000);
  return items;
}

export const upstreamFor = (t: Target, models: unknown[]) =>
  client(t.url, t.adminKey).post('/v1/ai/upstreams/create', { name: 'stub', kind: 'openai-compatible', base_url: t.stubUrl, api_key: 'sk-stub', models });

/** Bad input is a 400 naming the field, and changes nothing. */
export async function badInput(t: Target) {
  const admin = client(t.url, t.adminKey);
  const cases: [unknown, string][] = [
    [{ model_id: 'bad', modes: ['bogus'] }, 'modes.0'],
    [{ model_id: 'bad', modes: ['text'], prices: { input_per_mtok: -1 } }, 'prices.input_per_mtok'],
    [{ model_id: 'bad', modes: ['text'], prices: { per_token: 1 } }, 'prices.per_token'],
    [{ model_id: 'bad' }, 'modes'],
    [{ model_id: 'bad', modes: ['text'], provider: 'nope' }, 'provider'],
    [{ model_id: 'bad', modes: ['text'], aliases: ['bad'] }, 'aliases'],
    [{ model_id: 'has space', modes: ['text'] }, 'model_id'],
  ];
  for (const [body, param] of cases) {
    const r = await admin.post('/v1/ai/models/create', body);
    assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    assert.equal(errorOf(r).param, param, JSON.stringify(body));
  }
  const bad = await admin.post('/v1/cities/update', { city_id: 'nowhere-city', price_multiplier: -1 });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(errorOf(bad).param, 'price_multiplier');
  const list = await admin.get('/v1/ai/models/list');
  assert.equal(list.status, 200, list.text);
  assert.ok(!list.body.items.some((m: any) => m.model_id === 'bad'), 'nothing was created');
}

/**
 * An embeddings model created through the API on an OpenAI-compatible upstream serves the
 * official openai client and is charged at the city's price (base × 1.25), the record keeping
 * the base cost too.
 */
export async function embeddingsModel(t: Target) {
  const admin = client(t.url, t.adminKey);
  const m = await admin.post('/v1/ai/models/create', {
    model_id: 'my-embed',
    name: 'My embeddings',
    modes: ['embeddings'],
    upstream_model: 'text-embedding-3-small',
    prices: { input_per_mtok: 1_000_000 }, // 1 credit per token
  });
  assert.equal(m.status, 200, m.text);
  assert.equal(m.body.source, 'database');
  assert.deepEqual(m.body.modes, ['embeddings']);
  assert.equal((await upstreamFor(t, ['my-embed'])).status, 200);
  const city = 'emb-city';
  const token = await fund(t, city, 'eve', 1_000_000);
  assert.equal((await admin.post('/v1/cities/update', { city_id: city, price_multiplier: 1.25 })).status, 200);

  const openai = new OpenAI({ baseURL: `${t.url}/v1/ai`, apiKey: token, maxRetries: 0 });
  const res = await openai.embeddings.create({ model: 'my-embed', input: 'one two three', encoding_format: 'float' });
  assert.equal(res.data.length, 1);
  assert.equal(res.data[0].embedding.length, 1536);
  assert.equal(res.usage.prompt_tokens, 3);
  const sent = t.upstreamRequests().filter((r) => r.path === '/v1/embeddings').at(-1)!;
  assert.equal(sent.body.model, 'text-embedding-3-small', 'the upstream model id was sent');

  const [r] = await records(t, city, 1);
  assert.equal(r.model, 'my-embed');
  assert.equal(r.input_tokens, 3);
  assert.equal(r.base_credits, 3, '3 tokens × 1 credit');
  assert.equal(r.credits, 4, '3 × 1.25 = 3.75, rounded up');
  assert.equal(r.margin_credits, 1);
  await until('the charge lands', async () => (await client(t.url, token).get('/v1/balance/me')).body.credits === 1_000_000 - 4, 10_000);
}

/**
 * The first case: a model of TEXTPROVIDER_MODELS is a chat model, so embeddings were a
 * 400; a database model of the same id with the embeddings mode replaces it (keeping its env
 * slot) and serves the openai client.
 */
export async function replaceBuiltin(t: Target) {
  const admin = client(t.url, t.adminKey);
  assert.equal((await admin.post('/v1/env/upsert', { key: 'TEXTPROVIDER_MODELS', value: 'stub-model,stub-embed=text-embedding-3-small' })).status, 200);
  const token = await fund(t, 'builtin-city', 'bo', 1_000_000);
  const openai = new OpenAI({ baseURL: `${t.url}/v1/ai`, apiKey: token, maxRetries: 0 });
  await assert.rejects(openai.embeddings.create({ model: 'stub-embed', input: 'a b' }), (e: any) => e.status === 400 && /does not support embeddings/.test(e.message));
  const read = await admin.post('/v1/ai/models/update', { model_id: 'stub-embed', modes: ['embeddings'] });
  assert.equal(read.status, 400, 'a built-in model is read-only');
  assert.equal(errorOf(read).code, 'builtin_model');
  const r = await admin.post('/v1/ai/models/create', { model_id: 'stub-embed', modes: ['embeddings'], prices: { input_per_mtok: 2_000_000 } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.replaces_builtin, true);
  assert.equal(r.body.provider, 'textprovider', 'the built-in model’s env slot');
  assert.equal(r.body.upstream_model, 'text-embedding-3-small');
  const res = await openai.embeddings.create({ model: 'stub-embed', input: 'a b', encoding_format: 'float' });
  assert.equal(res.data[0].embedding.length, 1536);
  const [rec] = await records(t, 'builtin-city', 1);
  assert.equal(rec.model, 'stub-embed');
  assert.equal(rec.credits, 4, '2 tokens × 2 credits');
  // removed: the built-in chat model is back
  assert.equal((await admin.post('/v1/ai/models/remove', { model_id: 'stub-embed' })).status, 200);
  await assert.rejects(openai.embeddings.create({ model: 'stub-embed', input: 'a b' }), (e: any) => e.status === 400);
}

/** A city's allow-list refuses other models on every API, as if they did not exist. */
export async function allowList(t: Target) {
  const admin = client(t.url, t.adminKey);
  const city = 'allow-city';
  const token = await fund(t, city, 'ann', 1_000_000);
  const u = update(admin, city, { models: ['stub-model'] });
  assert.equal((await u).status, 200);
  const get = await admin.get(`/v1/cities/get?city_id=${city}`);
  assert.deepEqual(get.body.models, ['stub-model']);

  const asks: [string, unknown][] = [
    ['/v1/ai/chat/completions', { model: 'resold', messages: [{ role: 'user', content: 'hi' }] }],
    ['/v1/ai/responses', { model: 'resold', input: 'hi' }],
    ['/v1/ai/messages', { model: 'resold', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }],
    ['/v1/ai/embeddings', { model: 'my-embed', input: 'hi' }],
  ];
  const before = t.upstreamRequests().length;
  for (const [path, body] of asks) {
    const r = await call(t.url, 'POST', path, { token, body });
    assert.equal(r.status, 404, `${path}: ${r.text}`);
    // the Messages API answers in Anthropic's error shape
    if (path === '/v1/ai/messages') assert.equal((r.body as any).error.type, 'not_found_error', r.text);
    else assert.equal(errorOf(r).code, 'model_not_found');
  }
  assert.equal(t.upstreamRequests().length, before, 'nothing reached the upstream');
  const ok = await call(t.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
  assert.equal(ok.status, 200, ok.text);
  // the catalog a user sees is the allow-list
  const ids = (await client(t.url, token).get('/v1/ai/models')).body.data.map((m: any) => m.id);
  assert.deepEqual(ids, ['stub-model']);
  // another city still sees all
  const other = await fund(t, 'free-city', 'fay', 1000);
  const all = (await client(t.url, other).get('/v1/ai/models')).body.data.map((m: any) => m.id);
  assert.ok(all.includes('my-embed') && all.includes('resold') && all.includes('stub-model'), all.join(','));
}

const update = (admin: Client, city: string, body: object) => admin.post('/v1/cities/update', { city_id: city, ...body });

/**
 * 50 calls at once by one user whose credits cover exactly 10 at the city's price: 10 are
 * served and charged that price exactly; the records keep the base cost (the margin).
 */
export async function race(t: Target, o: { city: string; settings: object; model: string; cityPrice: number; basePrice: number }) {
  const token = await fund(t, o.city, 'racer', 10 * o.cityPrice);
  const set = await update(client(t.url, t.adminKey), o.city, o.settings);
  assert.equal(set.status, 200, set.text);
  const rs = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      call(t.url, 'POST', '/v1/ai/chat/completions', {
        token,
        body: { model: o.model, messages: [{ role: 'user', content: `race ${o.city} ${i}` }] },
      }),
    ),
  );
  const ok = rs.filter((r) => r.status === 200).length;
  for (const r of rs) if (r.status !== 200) assert.equal(r.status, 402, r.text);
  assert.equal(ok, 10, `credits for 10 at the city's price serve 10: ${rs.map((r) => r.status).join(',')}`);
  const recs = await records(t, o.city, 50);
  const served = recs.filter((r) => r.status === 'ok');
  assert.equal(served.length, 10);
  for (const r of served) {
    assert.equal(r.credits, o.cityPrice);
    assert.equal(r.base_credits, o.basePrice);
  }
  await until('balance 0', async () => (await client(t.url, token).get('/v1/balance/me')).body.credits === 0, 10_000);
  await sleep(300);
  assert.equal((await client(t.url, token).get('/v1/balance/me')).body.credits, 0, 'charged exactly, once');
  const sum = await client(t.url, t.adminKey).get(`/v1/usage/summary?city_id=${o.city}`);
  assert.equal(sum.body.totals.credits, 10 * o.cityPrice);
  assert.equal(sum.body.totals.base_credits, 10 * o.basePrice);
  assert.equal(sum.body.totals.margin_credits, 10 * (o.cityPrice - o.basePrice));
}

export async function pricedChatModels(t: Target) {
  const admin = client(t.url, t.adminKey);
  for (const id of ['resold', 'resold-2']) {
    const r = await admin.post('/v1/ai/models/create', { model_id: id, modes: ['text', 'stream', 'compat', 'responses', 'messages'], upstream_model: 'stub-model', prices: { per_request: 1000 } });
    assert.equal(r.status, 200, r.text);
  }
  assert.equal((await upstreamFor(t, ['resold', 'resold-2'])).status, 200);
  await fund(t, 'price-city', 'pat', 0);
  const r = await update(admin, 'price-city', { price_multiplier: 1.25, prices: { 'resold-2': { per_request: 700 } } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.price_multiplier, 1.25);
  assert.deepEqual(r.body.prices, { 'resold-2': { per_request: 700 } });
  // the city's bureau reads them, and cannot change them
  const b = await admin.post('/v1/bureaus/create', { city_id: 'price-city', name: 'price-city backend' });
  assert.equal(b.status, 200, b.text);
  const bureau = client(t.url, b.body.bureau_token);
  const seen = await bureau.get('/v1/cities/get?city_id=price-city');
  assert.equal(seen.status, 200, seen.text);
  assert.equal(seen.body.price_multiplier, 1.25);
  assert.deepEqual(seen.body.prices, { 'resold-2': { per_request: 700 } });
  const denied = await bureau.post('/v1/cities/update', { city_id: 'price-city', price_multiplier: 1 });
  assert.equal(denied.status, 403, denied.text);
  assert.equal((await admin.get('/v1/cities/get?city_id=price-city')).body.price_multiplier, 1.25, 'unchanged');
  // the user's catalog shows the city's prices
  const token = await fund(t, 'price-city', 'pam', 0);
  const items = (await client(t.url, token).get('/v1/ai/models')).body.items as any[];
  assert.deepEqual(items.find((m) => m.id === 'resold').price, { per_request: 1250 });
  assert.deepEqual(items.find((m) => m.id === 'resold-2').price, { per_request: 700 });
}

/** An alias is served and recorded: the record names the model and the alias asked for. */
export async function alias(t: Target) {
  const admin = client(t.url, t.adminKey);
  const r = await admin.post('/v1/ai/models/update', { model_id: 'resold', aliases: ['gpt-5'] });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.aliases, ['gpt-5']);
  const taken = await admin.post('/v1/ai/models/update', { model_id: 'resold-2', aliases: ['gpt-5'] });
  assert.equal(taken.status, 409, taken.text);
  assert.equal(errorOf(taken).param, 'aliases');
  const city = 'alias-city';
  const token = await fund(t, city, 'al', 100_000);
  const openai = new OpenAI({ baseURL: `${t.url}/v1/ai`, apiKey: token, maxRetries: 0 });
  const c = await openai.chat.completions.create({ model: 'gpt-5', messages: [{ role: 'user', content: 'alias please' }] });
  assert.ok(c.choices[0].message.content);
  const sent = t.upstreamRequests().filter((x) => x.path === '/v1/chat/completions').at(-1)!;
  assert.equal(sent.body.model, 'stub-model');
  const [rec] = await records(t, city, 1);
  assert.equal(rec.model, 'resold');
  assert.equal(rec.alias, 'gpt-5');
  assert.equal(rec.credits, 1000);
  // an allow-list naming the model lets its alias through; one naming neither refuses it
  assert.equal((await update(admin, city, { models: ['resold'] })).status, 200);
  assert.equal((await call(t.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'gpt-5', messages: [{ role: 'user', content: 'x' }] } })).status, 200);
  assert.equal((await update(admin, city, { models: ['resold-2'] })).status, 200);
  const refused = await call(t.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'gpt-5', messages: [{ role: 'user', content: 'x' }] } });
  assert.equal(refused.status, 404, refused.text);
}

/** A change through one process is seen by another on the same database within about 2 s. */
export async function secondProcess(t: Target): Promise<number> {
  const admin = client(t.url, t.adminKey);
  const seen = async () => ((await t.second('GET', '/v1/ai/models', { token: t.adminKey })).body.items ?? []).find((m: any) => m.id === 'late-model');
  assert.equal(await seen(), undefined);
  await t.second('GET', '/v1/ai/models/list', { token: t.adminKey }); // the second one has its snapshot now
  const t0 = Date.now();
  const r = await admin.post('/v1/ai/models/create', { model_id: 'late-model', modes: ['compat'], upstream_model: 'stub-model', prices: { per_request: 5 } });
  assert.equal(r.status, 200, r.text);
  assert.equal((await upstreamFor(t, ['late-model'])).status, 200);
  await until('the second process sees the model', async () => (await seen()) !== undefined, 10_000);
  const ms = Date.now() - t0;
  assert.ok(ms < 3500, `seen after ${ms} ms`);
  // and a disable too
  assert.equal((await admin.post('/v1/ai/models/update', { model_id: 'late-model', enabled: false })).status, 200);
  await until('the second process sees it disabled', async () => (await seen()) === undefined, 10_000);
  return ms;
}
