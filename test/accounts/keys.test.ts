// Users' API keys (issue 33): accounts/keys/create|list|update|revoke for users, bureaus and the
// admin; a key acts as its user through the official `openai` and `@anthropic-ai/sdk` clients
// (Bearer, x-api-key) and Google's `@google/genai` (x-goog-api-key); its own limits — models (404 model_not_found on
// chat/completions, Responses, Messages and embeddings), client addresses, rpm, expiry, a
// budget window (a 50-way race) — apply on top of the user's. After every test the key strings
// made so far appear nowhere: not in any table, the gateway's logs, its files (request logs in
// full mode), usage records or webhook payloads.
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { createAdminClient, createClient } from '../../src/client/index.ts';
import { aiCharged, assertBooksBalance, unsettled } from '../money/setup.ts';
import { startApiWorld, type ApiWorld } from '../ai/apis-setup.ts';
import { call, client, errorOf, type Res } from '../helpers/http.ts';
import { sqlAll, sqlGet } from '../helpers/sql.ts';
import { until } from '../helpers/wait.ts';
import { startReceiver, type Receiver } from '../stubs/webhook-receiver.ts';

let w: ApiWorld;
let rx: Receiver;
/** Every key string made in this file: none may be stored or logged anywhere. */
const secrets: string[] = [];

before(async () => {
  rx = await startReceiver();
  w = await startApiWorld({ env: { REQUEST_LOG: 'full', AI_FETCH_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_BASE_MS: '50' } });
  // The operator's endpoint receives every event of every city (usage, users, budgets …).
  const hook = await w.admin.post('/v1/webhooks/create', { city_id: '*', url: rx.url, events: ['*'] });
  assert.equal(hook.status, 200, hook.text);
});
after(async () => {
  await w?.close();
  await rx?.close();
});

/** Every file under a directory (the gateway's data: SQLite file and WAL, request-log bodies). */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push(p);
  }
  return out;
}

/** Every row of every table, as JSON text (SQLite or PostgreSQL). */
async function dumpTables(): Promise<string> {
  const t = w.gw;
  const tables = t.databaseUrl
    ? (await sqlAll<{ name: string }>(t, `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)).map((r) => r.name)
    : (await sqlAll<{ name: string }>(t, `SELECT name FROM sqlite_master WHERE type = 'table'`)).map((r) => r.name);
  assert.ok(tables.includes('user_keys') && tables.includes('usage') && tables.includes('request_logs') && tables.includes('webhook_messages'));
  let text = '';
  for (const name of tables) text += `${name}: ${JSON.stringify(await sqlAll(t, `SELECT * FROM "${name}"`))}\n`;
  return text;
}

afterEach(async () => {
  if (secrets.length === 0) return;
  const places: [string, string][] = [
    ['the database', await dumpTables()],
    ["the gateway's stdout", w.gw.stdout()],
    ["the gateway's stderr", w.gw.stderr()],
    ['webhook deliveries', rx.deliveries.map((d) => d.body).join('\n')],
  ];
  for (const f of filesUnder(w.gw.dir)) places.push([f, readFileSync(f).toString('latin1')]);
  for (const s of secrets) {
    for (const [where, text] of places) assert.ok(!text.includes(s), `a key's secret is in ${where}`);
    // nor its secret part alone
    for (const [where, text] of places) assert.ok(!text.includes(s.slice(20)), `a key's secret part is in ${where}`);
  }
});

const KEY = /^cg_key_([a-z0-9]{12})_[A-Za-z0-9]{40}$/;
const openaiWith = (key: string) => new OpenAI({ baseURL: `${w.gw.url}/v1/ai`, apiKey: key, maxRetries: 0 });
const anthropicWith = (key: string) => new Anthropic({ baseURL: `${w.gw.url}/v1/ai`, apiKey: key, maxRetries: 0 });
const chat = (key: string, model = 'stub-model', content = 'hello there') =>
  call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: key, body: { model, messages: [{ role: 'user', content }], max_tokens: 20 } });

/** Makes a key (as `token`'s identity) and keeps its secret for the checks after each test. */
async function makeKey(token: string, body: Record<string, unknown>): Promise<{ id: string; secret: string; key: any; res: Res }> {
  const res = await call(w.gw.url, 'POST', '/v1/accounts/keys/create', { token, body });
  assert.equal(res.status, 200, res.text);
  const secret = res.body.secret as string;
  secrets.push(secret);
  return { id: res.body.key.id, secret, key: res.body.key, res };
}

const keysOf = async (token: string, body: Record<string, unknown> = {}) => {
  const r = await client(w.gw.url, token).post('/v1/accounts/keys/list', body);
  assert.equal(r.status, 200, r.text);
  return r.body.items as any[];
};

describe('the life of a key', () => {
  test('create (secret once, hash only) → use with the openai client → last_used_at → update → revoke: refused at once', async () => {
    const t = await w.user('life');
    const { city, user } = w.owner(t);
    const { id, secret, key, res } = await makeKey(t, { name: 'laptop claude', models: ['stub-model', 'claude'] });
    assert.match(secret, KEY);
    assert.equal(KEY.exec(secret)![1], id);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.deepEqual(
      { ...key, created_at: undefined },
      { id, name: 'laptop claude', prefix: `cg_key_${id}`, city_id: city, user_id: user, models: ['stub-model', 'claude'], budget: null, spent: null, expires_at: null, allowed_ips: null, rpm: null, status: 'active', created_at: undefined, last_used_at: null },
    );
    // Stored: the SHA-256 of the key only.
    const row = await sqlGet<{ secret_hash: string }>(w.gw, 'SELECT secret_hash FROM user_keys WHERE key_id = ?', [id]);
    assert.equal(row?.secret_hash, createHash('sha256').update(secret).digest('hex'));

    // The key acts as its user: the openai client, Bearer.
    const oa = openaiWith(secret);
    const r = await oa.chat.completions.create({ model: 'stub-model', messages: [{ role: 'user', content: 'hello there' }] });
    assert.match(r.choices[0].message.content ?? '', /hello there/);
    const me = await call(w.gw.url, 'GET', '/v1/accounts/me', { token: secret });
    assert.deepEqual([me.body.city_id, me.body.user_id], [city, user]);
    // The call's usage record carries the key; the user sees it with a login token.
    const [rec] = await w.records(t, 1);
    assert.equal(rec.key_id, id);

    // last_used_at is written off the request path, within a second or so.
    const used = await until('last_used_at', async () => (await keysOf(t)).find((k) => k.id === id)?.last_used_at, 10_000);
    assert.ok(Math.abs(Date.parse(used) - Date.now()) < 60_000);

    // The list never shows a secret; the key cannot manage keys.
    const listed = await client(w.gw.url, t).post('/v1/accounts/keys/list', {});
    assert.ok(!listed.text.includes(secret.slice(20)));
    for (const a of ['create', 'list', 'update', 'revoke']) {
      const byKey = await call(w.gw.url, 'POST', `/v1/accounts/keys/${a}`, { token: secret, body: a === 'create' ? { name: 'x' } : a === 'list' ? {} : { id } });
      assert.equal(byKey.status, 403, `${a}: ${byKey.text}`);
      assert.equal(errorOf(byKey).code, 'key_not_allowed');
    }

    // update: name and limits; null clears one.
    const up = await client(w.gw.url, t).post('/v1/accounts/keys/update', { id: `cg_key_${id}`, name: 'renamed', rpm: 100, models: null });
    assert.equal(up.status, 200, up.text);
    assert.deepEqual([up.body.key.name, up.body.key.rpm, up.body.key.models], ['renamed', 100, null]);
    assert.equal((await chat(secret, 'claude')).status, 200, 'models: null lets the key call every model the city allows');

    // revoke: refused at once on this process, by every client.
    const rv = await client(w.gw.url, t).post('/v1/accounts/keys/revoke', { id });
    assert.equal(rv.status, 200, rv.text);
    assert.equal(rv.body.key.status, 'revoked');
    const refused = await chat(secret);
    assert.equal(refused.status, 401);
    assert.equal(errorOf(refused).code, 'key_revoked');
    await assert.rejects(oa.chat.completions.create({ model: 'stub-model', messages: [{ role: 'user', content: 'again' }] }), (e: any) => e.status === 401);
    assert.equal((await call(w.gw.url, 'GET', '/v1/ai/models', { headers: { 'x-api-key': secret } })).status, 401);
    // Revoked stays revoked: a second revoke answers it as it is; an update is a 409.
    assert.equal((await client(w.gw.url, t).post('/v1/accounts/keys/revoke', { id })).body.key.status, 'revoked');
    const late = await client(w.gw.url, t).post('/v1/accounts/keys/update', { id, name: 'back' });
    assert.equal(late.status, 409);
    assert.deepEqual((await keysOf(t, { status: 'revoked' })).map((k) => k.id), [id]);
    assert.deepEqual(await keysOf(t, { status: 'active' }), []);
  });

  test('@anthropic-ai/sdk with the key as x-api-key on the Messages API; x-goog-api-key works too', async () => {
    const t = await w.user('claude-code');
    const { secret } = await makeKey(t, { name: 'claude code' });
    const before = w.anthropic.requests.length;
    const m = await anthropicWith(secret).messages.create({ model: 'claude', max_tokens: 50, messages: [{ role: 'user', content: 'hello there' }] });
    assert.equal(m.content.map((b) => (b.type === 'text' ? b.text : '')).join(''), 'Hello from anthropic stub: hello there');
    const up = w.anthropic.requests.slice(before).at(-1)!;
    assert.equal(up.headers['x-api-key'], w.anthropic.apiKey, 'upstream gets the operator key, never the user key');
    const models = await call(w.gw.url, 'GET', '/v1/ai/models', { headers: { 'x-goog-api-key': secret } });
    assert.equal(models.status, 200, models.text);
    const [rec] = await w.records(t, 1);
    assert.equal(rec.mode, 'messages');
  });

  test("Google's @google/genai client sends the key as x-goog-api-key (Gemini API); the allow-list holds there too", async () => {
    const t = await w.user('gemini');
    const { secret } = await makeKey(t, { name: 'gemini cli', models: ['stub-model'] });
    const genai = new GoogleGenAI({ apiKey: secret, httpOptions: { baseUrl: w.gw.url, apiVersion: 'v1beta' } });
    const r = await genai.models.generateContent({ model: 'stub-model', contents: 'hello there' });
    assert.match(r.text ?? '', /hello there/);
    const [rec] = await w.records(t, 1);
    assert.equal(rec.key_id, KEY.exec(secret)![1]);
    await assert.rejects(genai.models.generateContent({ model: 'claude', contents: 'hi' }), (e: any) => /404/.test(String(e.status ?? e.message)));
  });
});

describe('the client SDK and the OpenAPI document', () => {
  test('client.accounts.keys makes, lists, updates and revokes; /openapi.json lists the four actions and real answers match their schemas', async () => {
    const t = await w.user('sdk');
    const c = createClient({ baseURL: w.gw.url, token: t });
    const made = await c.accounts.keys.create({ name: 'from the sdk', budget: { credits: 1000, window: 'week' } });
    secrets.push(made.secret);
    assert.match(made.secret, KEY);
    const listed = await c.accounts.keys.list({});
    const updated = await c.accounts.keys.update({ id: made.key.id, rpm: 60 });
    const revoked = await c.accounts.keys.revoke({ id: made.key.id });
    assert.deepEqual([updated.key.rpm, revoked.key.status], [60, 'revoked']);
    const adminSdk = createAdminClient({ baseURL: w.gw.url, adminKey: w.gw.adminKey });
    const { city, user } = w.owner(t);
    assert.ok((await adminSdk.accounts.keys.list({ city_id: city, user_id: user })).items.some((k) => k.id === made.key.id));

    const doc = (await call(w.gw.url, 'GET', '/openapi.json')).body;
    const ajv = addFormats.default(new Ajv2020({ strict: false }));
    const answers: Record<string, unknown[]> = { create: [made], list: [listed], update: [updated], revoke: [revoked] };
    for (const a of ['create', 'list', 'update', 'revoke']) {
      const op = doc.paths[`/v1/accounts/keys/${a}`]?.post;
      assert.ok(op, `${a} is documented`);
      assert.ok(op.requestBody.content['application/json'].schema.properties, `${a}: its input schema`);
      const validate = ajv.compile(op.responses['200'].content['application/json'].schema);
      for (const body of answers[a]) assert.ok(validate(body), `${a}: ${JSON.stringify(validate.errors)}`);
    }
    assert.match(JSON.stringify(doc.paths['/v1/accounts/keys/create'].post.requestBody), /"day","week","30d"/);
  });
});

describe('redaction', () => {
  test('a key string in a prompt (and in the answer that echoes it) is redacted in the full request log', async () => {
    const t = await w.user('paste');
    const { secret } = await makeKey(t, { name: 'caller' });
    const pasted = (await makeKey(t, { name: 'pasted' })).secret;
    const r = await chat(secret, 'stub-model', `my other key is ${pasted} ok`);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.text.includes(pasted), 'the stub echoes the prompt (the answer is the caller’s own)');
    const requestId = r.headers.get('x-request-id')!;
    const log = await until('the request log', async () => {
      const x = await w.admin.get(`/v1/usage/request-log?request_id=${requestId}`);
      return x.status === 200 && x.body.response?.body ? x : null;
    }, 15_000);
    assert.ok(!log.text.includes(pasted.slice(20)) && !log.text.includes(secret.slice(20)), log.text.slice(0, 2000));
    assert.match(JSON.stringify(log.body.request.body), /my other key is \[redacted\] ok/);
  });
});

describe("a key's own limits", () => {
  test('models: 404 model_not_found on chat/completions, Responses, Messages and embeddings; the same calls work with an unlimited key', async () => {
    const t = await w.user('allow');
    const open = (await makeKey(t, { name: 'open' })).secret;
    const narrow = (await makeKey(t, { name: 'narrow', models: ['embed-sdk'] })).secret;
    const calls = {
      'chat/completions': (k: string) => openaiWith(k).chat.completions.create({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] }),
      responses: (k: string) => openaiWith(k).responses.create({ model: 'stub-model', input: 'hi', max_output_tokens: 20 }),
      messages: (k: string) => anthropicWith(k).messages.create({ model: 'claude', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }),
      embeddings: (k: string) => openaiWith(k).embeddings.create({ model: 'embed-small', input: 'hi' }),
    };
    for (const [api, f] of Object.entries(calls)) {
      await f(open); // the unlimited key: served
      await assert.rejects(f(narrow), (e: any) => {
        assert.equal(e.status, 404, `${api}: ${e.message}`);
        const body = e.error ?? {};
        // OpenAI's error shape (code) and Anthropic's (type)
        assert.ok(body.code === 'model_not_found' || body.error?.type === 'not_found_error' || e.code === 'model_not_found', `${api}: ${JSON.stringify(body)}`);
        return true;
      });
    }
    const ok = await openaiWith(narrow).embeddings.create({ model: 'embed-sdk', input: 'hi' });
    assert.equal(ok.data.length, 1);
    const listed = await call(w.gw.url, 'GET', '/v1/ai/models', { token: narrow });
    assert.deepEqual(listed.body.items.map((m: any) => m.id), ['embed-sdk'], 'the model list shows what the key may call');
  });

  test('allowed_ips: refused from another address (403 ip_not_allowed), served once the address is allowed', async () => {
    const t = await w.user('ips');
    const { id, secret } = await makeKey(t, { name: 'office', allowed_ips: ['10.0.0.0/8', '2001:db8::/32'] });
    const r = await chat(secret);
    assert.equal(r.status, 403, r.text);
    assert.equal(errorOf(r).code, 'ip_not_allowed');
    const up = await client(w.gw.url, t).post('/v1/accounts/keys/update', { id, allowed_ips: ['10.0.0.0/8', '127.0.0.1', '::1'] });
    assert.equal(up.status, 200, up.text);
    assert.equal((await chat(secret)).status, 200, 'the change applies at once on this process');
  });

  test('rpm: the key is limited on top of its user (who is not)', async () => {
    const t = await w.user('rpm');
    const { secret } = await makeKey(t, { name: 'script', rpm: 1 });
    // Three calls in a row: at most two minute windows, so at least one is refused. (A fourth
    // call asked for a 429 of its own once, and got 200 on a loaded machine: the third and the
    // fourth fell on either side of a minute's turn.)
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await chat(secret));
    const limited = answers.find((r) => r.status === 429);
    assert.ok(limited, answers.map((r) => r.status).join(','));
    assert.match(errorOf(limited).message, /API key: 1 requests per minute/);
    assert.equal((await chat(t)).status, 200, 'the user with a login token is not limited');
  });

  test('expires_at: served until then, refused after (401 key_expired), listed as expired', async () => {
    const t = await w.user('expiry');
    const { id, secret } = await makeKey(t, { name: 'short', expires_at: new Date(Date.now() + 2000).toISOString() });
    assert.equal((await chat(secret)).status, 200);
    const r = await until('the key to expire', async () => {
      const x = await chat(secret);
      return x.status === 401 ? x : null;
    }, 15_000);
    assert.equal(errorOf(r).code, 'key_expired');
    assert.equal((await keysOf(t)).find((k) => k.id === id).status, 'expired');
    assert.deepEqual((await keysOf(t, { status: 'expired' })).map((k) => k.id), [id]);
  });
});

describe('who may manage keys', () => {
  test('users: their own only; bureaus: their city’s users; the admin: everyone; guests: nobody', async () => {
    const a = await w.user('owner-a');
    const b = await w.user('owner-b');
    const { city: cityA, user: userA } = w.owner(a);
    const { id } = await makeKey(a, { name: 'mine' });
    const ub = client(w.gw.url, b);
    for (const action of ['update', 'revoke']) {
      const r = await ub.post(`/v1/accounts/keys/${action}`, { id, name: action === 'update' ? 'theirs' : undefined });
      assert.equal(r.status, 404, r.text);
      assert.equal(errorOf(r).code, 'key_not_found');
    }
    assert.deepEqual(await keysOf(b), []);
    const other = await client(w.gw.url, a).post('/v1/accounts/keys/create', { name: 'for bob', user_id: 'someone-else' });
    assert.equal(other.status, 403);
    assert.equal((await call(w.gw.url, 'POST', '/v1/accounts/keys/list', { body: {} })).status, 401);

    // A bureau of city A: its users' keys, by user_id.
    const bureau = (await w.admin.post('/v1/bureaus/create', { city_id: cityA, name: 'backend' })).body.bureau_token as string;
    const bc = client(w.gw.url, bureau);
    const noUser = await bc.post('/v1/accounts/keys/create', { name: 'x' });
    assert.equal(noUser.status, 400);
    assert.equal(errorOf(noUser).param, 'user_id');
    const made = await makeKey(bureau, { name: 'from the backend', user_id: userA, budget: { credits: 5000, window: 'day' } });
    assert.deepEqual([made.key.city_id, made.key.user_id, made.key.budget, made.key.spent?.credits], [cityA, userA, { credits: 5000, window: 'day' }, 0]);
    assert.equal((await chat(made.secret)).status, 200);
    assert.deepEqual(new Set((await keysOf(bureau, { user_id: userA })).map((k) => k.id)), new Set([id, made.id]));
    assert.deepEqual(new Set((await keysOf(a)).map((k) => k.id)), new Set([id, made.id]), 'the user sees keys the backend made for them');
    // … and nothing of another city.
    const { id: idB } = await makeKey(b, { name: 'other city' });
    assert.equal((await bc.post('/v1/accounts/keys/revoke', { id: idB })).status, 404);
    assert.equal((await bc.post('/v1/accounts/keys/list', { city_id: w.owner(b).city })).status, 403);

    // The admin: city_id and user_id to make one; lists and revokes anyone's.
    const noCity = await w.admin.post('/v1/accounts/keys/create', { name: 'x', user_id: 'u' });
    assert.equal(errorOf(noCity).param, 'city_id');
    const nowhere = await w.admin.post('/v1/accounts/keys/create', { name: 'x', city_id: 'no-such-city', user_id: 'u' });
    assert.equal(nowhere.status, 404);
    assert.equal((await w.admin.post('/v1/accounts/keys/revoke', { id: idB })).body.key.status, 'revoked');
    assert.ok((await keysOf(w.gw.adminKey, { city_id: cityA })).length >= 2);
  });

  test('bad input to every action: a 400 that names the field', async () => {
    const t = await w.user('bad-input');
    const { id } = await makeKey(t, { name: 'ok' });
    const past = new Date(Date.now() - 60_000).toISOString();
    const cases: [string, Record<string, unknown>, string][] = [
      ['create', {}, 'name'],
      ['create', { name: '' }, 'name'],
      ['create', { name: 'x'.repeat(101) }, 'name'],
      ['create', { name: 7 }, 'name'],
      ['create', { name: 'k', models: 'stub-model' }, 'models'],
      ['create', { name: 'k', models: [] }, 'models'],
      ['create', { name: 'k', models: [''] }, 'models.0'],
      ['create', { name: 'k', budget: { credits: 0 } }, 'budget.credits'],
      ['create', { name: 'k', budget: { credits: 1.5 } }, 'budget.credits'],
      ['create', { name: 'k', budget: { credits: 10, window: 'month' } }, 'budget.window'],
      ['create', { name: 'k', budget: { credits: 10, period: 'day' } }, 'budget.period'],
      ['create', { name: 'k', budget: 100 }, 'budget'],
      ['create', { name: 'k', expires_at: 'tomorrow' }, 'expires_at'],
      ['create', { name: 'k', expires_at: past }, 'expires_at'],
      ['create', { name: 'k', allowed_ips: ['10.0.0.0/33'] }, 'allowed_ips.0'],
      ['create', { name: 'k', allowed_ips: ['example.com'] }, 'allowed_ips.0'],
      ['create', { name: 'k', allowed_ips: [] }, 'allowed_ips'],
      ['create', { name: 'k', rpm: 0 }, 'rpm'],
      ['create', { name: 'k', rpm: '10' }, 'rpm'],
      ['create', { name: 'k', expire_at: past }, 'expire_at'],
      ['create', { name: 'k', user_id: 'bad id!' }, 'user_id'],
      ['list', { limit: 0 }, 'limit'],
      ['list', { status: 'gone' }, 'status'],
      ['list', { cursor: 'nonsense' }, 'cursor'],
      ['list', { colour: 'red' }, 'colour'],
      ['update', {}, 'id'],
      ['update', { id: 'short' }, 'id'],
      ['update', { id, rpm: -1 }, 'rpm'],
      ['update', { id, name: '' }, 'name'],
      ['update', { id, budget: { credits: 'lots' } }, 'budget.credits'],
      ['update', { id, expires_at: past }, 'expires_at'],
      ['update', { id, secret: 'x' }, 'secret'],
      ['revoke', {}, 'id'],
      ['revoke', { id: 42 }, 'id'],
      ['revoke', { id: `${id}x` }, 'id'],
    ];
    for (const [action, body, param] of cases) {
      const r = await client(w.gw.url, t).post(`/v1/accounts/keys/${action}`, body);
      assert.equal(r.status, 400, `${action} ${JSON.stringify(body)}: ${r.text}`);
      const e = errorOf(r);
      assert.equal(e.param, param, `${action} ${JSON.stringify(body)}: ${r.text}`);
    }
    const notJson = await call(w.gw.url, 'POST', '/v1/accounts/keys/create', { token: t, raw: '{name', headers: { 'content-type': 'application/json' } });
    assert.equal(notJson.status, 400);
    const unknown = await client(w.gw.url, t).post('/v1/accounts/keys/revoke', { id: 'aaaaaaaaaaaa' });
    assert.equal(unknown.status, 404);
    assert.equal(errorOf(unknown).param, 'id');
  });
});

describe('usage by key', () => {
  test('usage/list, usage/me and usage/stats filter by key_id', async () => {
    const t = await w.user('by-key');
    const { city } = w.owner(t);
    const one = await makeKey(t, { name: 'one' });
    const two = await makeKey(t, { name: 'two' });
    for (let i = 0; i < 3; i++) assert.equal((await chat(one.secret)).status, 200);
    assert.equal((await chat(two.secret)).status, 200);
    await w.records(t, 4);
    const listed = await w.admin.get(`/v1/usage/list?city_id=${city}&key_id=${one.id}`);
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.items.map((r: any) => r.key_id), [one.id, one.id, one.id]);
    const mine = await client(w.gw.url, t).get(`/v1/usage/me?key_id=cg_key_${two.id}`);
    assert.deepEqual(mine.body.items.map((r: any) => r.key_id), [two.id]);
    const stats = await w.admin.get(`/v1/usage/stats?key_id=${one.id}&group=model`);
    assert.equal(stats.status, 200, stats.text);
    assert.equal(stats.body.totals.calls, 3);
    assert.equal(stats.body.totals.credits, listed.body.items.reduce((s: number, r: any) => s + r.credits, 0));
    assert.deepEqual(stats.body.items.map((i: any) => [i.model, i.calls]), [['stub-model', 3]]);
    const bad = await w.admin.get('/v1/usage/stats?key_id=nope');
    assert.equal(bad.status, 400);
    assert.equal(errorOf(bad).param, 'key_id');
    // The index by key holds only the records made with a key (most calls have none), and the
    // reads by key still go through it.
    const def = w.gw.databaseUrl
      ? (await sqlGet<{ def: string }>(w.gw, `SELECT indexdef AS def FROM pg_indexes WHERE indexname = 'usage_by_key'`))!.def
      : (await sqlGet<{ def: string }>(w.gw, `SELECT sql AS def FROM sqlite_master WHERE name = 'usage_by_key'`))!.def;
    assert.match(def, /WHERE \(?key_id IS NOT NULL\)?$/);
    if (!w.gw.databaseUrl) {
      const plan = await sqlAll<{ detail: string }>(w.gw, 'EXPLAIN QUERY PLAN SELECT COUNT(*) FROM usage WHERE key_id = ? AND created_at >= ? AND created_at < ?', [one.id, 0, Date.now()]);
      assert.match(plan.map((p) => p.detail).join('\n'), /USING (COVERING )?INDEX usage_by_key/);
    }
  });
});

describe('a budget window under a race', () => {
  test('50 calls at once against a key’s daily budget: Σ charged ≤ budget, Σ charges = Σ usage credits', async () => {
    const t = await w.user('race');
    const { city, user } = w.owner(t);
    // a hold is the worst case (max_tokens 20); each call costs its usage: about 10 calls' worth
    const budget = 400;
    const { id, secret } = await makeKey(t, { name: 'capped', budget: { credits: budget, window: 'day' } });
    const start = await w.balance(t);
    const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => chat(secret, 'stub-model', `race ${i}`)));
    const ok = rs.filter((r) => r.status === 200).length;
    const refused = rs.filter((r) => r.status === 402);
    assert.equal(ok + refused.length, 50, rs.map((r) => r.status).join(','));
    assert.ok(ok > 0 && refused.length > 0, `${ok} served, ${refused.length} refused`);
    for (const r of refused) assert.equal(errorOf(r).code, 'key_budget_exceeded');

    await until('charges written, leases returned', async () => (await unsettled(w.gw, user)) === 0, 20_000);
    const usage = async () => (await sqlGet<{ n: number; c: number }>(w.gw, 'SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS c FROM usage WHERE key_id = ?', [id]))!;
    await until('every usage record', async () => Number((await usage()).n) === 50, 20_000);
    const u = await usage();
    const charged = await aiCharged(w.gw, user);
    assert.ok(charged <= budget, `charged ${charged} > budget ${budget}`);
    assert.equal(charged, Number(u.c), 'Σ charges = Σ usage credits');
    assert.equal(start - (await w.balance(t)), charged);
    await assertBooksBalance(w.gw);
    const view = (await keysOf(t)).find((k) => k.id === id);
    await until('spent settles to the charges', async () => (await keysOf(t)).find((k) => k.id === id).spent.credits === charged, 10_000);
    assert.ok(view.spent.window_start && view.spent.resets_at);
    void city;
  });
});

test('the webhook endpoint received this file’s events (the checks after each test read their payloads)', async () => {
  await until('webhook deliveries', () => rx.deliveries.length > 0, 30_000);
  const types = new Set(rx.deliveries.map((d) => JSON.parse(d.body).type));
  assert.ok(types.has('user.created'), [...types].join(','));
});
