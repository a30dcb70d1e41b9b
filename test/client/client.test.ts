// citygate/client against a running gateway (stub upstreams: OpenAI, Stripe, GitHub): every
// service from the user side and from the admin and bureau sides, typed errors, and every JSON
// answer checked against the response schema /openapi.json documents for it.
import { readUIMessageStream } from 'ai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { CitygateError, createAdminClient, createClient, type CitygateAdminClient, type CitygateClient } from 'citygate/client';
import { startAiWorld, type AiWorld } from '../ai/setup.ts';
import { until } from '../money/setup.ts';
import { startGitHubStub, type GitHubStub } from '../stubs/github.ts';
import { startStripeStub, type StripeStub } from '../stubs/stripe.ts';

let w: AiWorld;
let gh: GitHubStub;
let stripe: StripeStub;
let admin: CitygateAdminClient;
let alice: CitygateClient;
let doc: any;
/** Every JSON answer the clients received: [path, status, body]. */
const answers: [string, number, unknown][] = [];

/** A fetch that records what the client receives (and proves the `fetch` option is used). */
const recordingFetch = async (input: Request | string | URL, init?: RequestInit) => {
  const res = await fetch(input, init);
  if ((res.headers.get('content-type') ?? '').startsWith('application/json')) {
    const body = await res.clone().json();
    answers.push([new URL(String(input)).pathname, res.status, body]);
  }
  return res;
};

before(async () => {
  [gh, stripe] = await Promise.all([startGitHubStub(), startStripeStub()]);
  w = await startAiWorld({
    env: {
      OPENAI_API_KEY: 'sk-stub',
      BALANCE_INITIAL_CREDITS: '0', // users start empty here: the 402 test needs one
      MODEL_PRICES: JSON.stringify({ aliased: { per_request: 1000 } }),
      PAYMENT_A_SECRET_KEY: stripe.apiKey,
      PAYMENT_A_API_BASE: stripe.origin,
      OAUTH_A_CLIENT_ID: gh.clientId,
      OAUTH_A_CLIENT_SECRET: gh.clientSecret,
      OAUTH_A_AUTHORIZE_URL: gh.authorizeUrl,
      OAUTH_A_TOKEN_URL: gh.tokenUrl,
      OAUTH_A_API_URL: gh.apiBase,
      USAGE_FLUSH_MS: '20',
    },
  });
  gh.setRedirectUri(`${w.gw.url}/v1/accounts/oauth/callback`);
  admin = createAdminClient({ baseURL: w.gw.url, adminKey: w.gw.adminKey, fetch: recordingFetch });
  alice = createClient({ baseURL: w.gw.url, token: w.alice, fetch: recordingFetch });
  doc = await (await fetch(`${w.gw.url}/openapi.json`)).json();
});
after(async () => {
  await w?.close();
  await Promise.all([gh?.close(), stripe?.close()]);
});

/** Runs `f`, which must throw a CitygateError; answers it. */
async function rejects(f: () => Promise<unknown>): Promise<CitygateError> {
  try {
    await f();
  } catch (e) {
    assert.ok(e instanceof CitygateError, `not a CitygateError: ${e}`);
    return e;
  }
  assert.fail('did not throw');
}

describe('user side', () => {
  test('ai: models, text, call(), openai package with the client’s options', async () => {
    const models = await alice.ai.models();
    assert.ok(models.items.some((m) => m.id === 'stub-model'));
    assert.ok(models.items.every((m) => !('env_requirements' in m)), 'the user view');
    const msg = await alice.ai.text({ model: 'stub-model', prompt: 'hello client' });
    assert.equal(msg.role, 'assistant');
    assert.equal(msg.parts[0].text, 'Hello from stub: hello client');
    assert.equal(msg.metadata.usage.input_tokens > 0, true);
    const viaCall = await alice.call('ai', 'text', { model: 'stub-model', prompt: 'generic' });
    assert.equal(viaCall.parts[0].text, 'Hello from stub: generic');
    const openai = new OpenAI({ ...(await alice.ai.openaiOptions()), maxRetries: 0 });
    const c = await openai.chat.completions.create({ model: 'stub-model', messages: [{ role: 'user', content: 'via openai' }] });
    assert.equal(c.choices[0].message.content, 'Hello from stub: via openai');
  });

  test('ai.stream: UI message chunks that readUIMessageStream assembles', async () => {
    const stream = await alice.ai.stream({ model: 'stub-model', prompt: 'stream me' });
    let last;
    for await (const m of readUIMessageStream({ stream })) last = m;
    assert.equal(last!.role, 'assistant');
    const text = last!.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text).join('');
    assert.equal(text, 'Hello from stub: stream me');
  });

  test('ai: image and video jobs, tts, asr (bytes as multipart, base64 as JSON)', async () => {
    // Media models are priced: a user with credits.
    const t = await admin.tokens.apply({ city_id: 'city-a', user_id: 'carol' });
    await admin.balance.adjust({ city_id: 'city-a', user_id: 'carol', credits: 100_000_000, reason: 'media', idempotency_key: 'carol' });
    const alice = createClient({ baseURL: w.gw.url, token: t.user_token, fetch: recordingFetch });
    const job = await alice.ai.imageCreate({ model: 'openai/gpt-image-1', prompt: 'a fox' });
    assert.equal(job.status, 'queued');
    const img = (await until(async () => {
      const r = await alice.ai.imageResult({ job_id: job.job_id });
      return r.status === 'succeeded' || r.status === 'failed' ? r : null;
    }, 10_000, 'image job'))!;
    assert.equal(img.status, 'succeeded', JSON.stringify(img));
    assert.equal(img.images?.length, 1);
    const v = await alice.ai.video({ model: 'stub-video', prompt: 'waves', seconds: 1 });
    const vid = (await until(async () => {
      const r = await alice.ai.video({ job_id: v.job_id });
      return r.status === 'succeeded' || r.status === 'failed' ? r : null;
    }, 10_000, 'video job'))!;
    assert.equal(vid.status, 'succeeded', JSON.stringify(vid));
    const audio = await alice.ai.tts({ model: 'openai/tts-1', text: 'hello', format: 'wav' });
    assert.equal(audio.type, 'audio/wav');
    assert.ok(audio.size > 44);
    const bytes = new Uint8Array(await audio.arrayBuffer());
    const fromBytes = await alice.ai.asr({ model: 'openai/whisper-1', audio: bytes });
    assert.equal(fromBytes.text, `stub transcript of ${bytes.byteLength} bytes`);
    const fromB64 = await alice.ai.asr({ model: 'openai/whisper-1', audio: Buffer.from(bytes).toString('base64') });
    assert.equal(fromB64.text, fromBytes.text);
    assert.ok(w.stub.requests.some((r) => r.path === '/v1/audio/transcriptions'));
  });

  test('accounts: providers, local login, me; oauthLogin starts, opens, polls and signs the client in', async () => {
    const guest = createClient({ baseURL: w.gw.url, fetch: recordingFetch });
    const p = await guest.accounts.providers();
    assert.deepEqual(p.items.map((i) => i.id), ['local', 'github']);
    const local = await guest.accounts.login({ city_id: 'city-a', name: 'Ann' });
    assert.equal(local.city_id, 'city-a');
    guest.setToken(local.user_token);
    assert.equal((await guest.accounts.me()).name, 'Ann');

    gh.setUser({ id: 77, login: 'lin', name: 'Lin', email: 'lin@example.com', email_verified: true, avatar_url: 'https://a.example/l.png' });
    const browser = createClient({ baseURL: w.gw.url, fetch: recordingFetch });
    const opened: string[] = [];
    const done = await browser.accounts.oauthLogin(
      { city_id: 'city-a', provider: 'github' },
      {
        intervalMs: 50,
        // What a popup does: the provider signs the user in and returns to the gateway's callback.
        open: async (url) => {
          opened.push(url);
          setTimeout(async () => {
            const back = (await fetch(url, { redirect: 'manual' })).headers.get('location')!;
            await (await fetch(back, { redirect: 'manual' })).text();
          }, 120);
        },
      },
    );
    assert.equal(opened.length, 1);
    assert.equal(done.status, 'done');
    const me = await browser.accounts.me();
    assert.equal(me.user_id, done.user_id);
    assert.equal(me.identities[0].provider, 'github');

    // A refused login surfaces as a typed error with the provider's reason.
    const refused = await rejects(() =>
      browser.accounts.oauthLogin(
        { city_id: 'city-a', provider: 'github' },
        {
          intervalMs: 50,
          open: async (url) => {
            const state = new URL(url).searchParams.get('state')!;
            await (await fetch(`${w.gw.url}/v1/accounts/oauth/callback?error=access_denied&state=${state}`)).text();
          },
        },
      ),
    );
    assert.equal(refused.code, 'access_denied');
  });

  test('balance, payment, usage, cities.current', async () => {
    const city = await alice.cities.current();
    assert.equal(city.city_id, 'city-a');
    assert.equal((await alice.balance.me()).credits, 0);
    const methods = await alice.payment.methods();
    assert.equal(methods.items.find((m) => m.method === 'a')?.enabled, true);
    const co = await alice.payment.checkout({ method: 'stripe', credits: 1_000_000 });
    assert.match(co.checkout_url, /^http/);
    assert.equal((await alice.payment.payments()).items[0].payment_id, co.payment_id);
    const usage = (await until(async () => {
      const u = await alice.usage.me({ limit: 50 });
      return u.items.length ? u : null;
    }, 5000, 'usage records'))!;
    assert.equal(usage.items[0].city_id, 'city-a');
    assert.deepEqual((await alice.balance.history()).items, []);
  });
});

describe('typed errors', () => {
  test('401: no credential, and a bad one', async () => {
    const guest = createClient({ baseURL: w.gw.url });
    const e = await rejects(() => guest.ai.models());
    assert.deepEqual([e.status, e.type, e.code], [401, 'authentication_error', 'missing_credential']);
    const bad = createClient({ baseURL: w.gw.url, token: 'not-a-token' });
    assert.equal((await rejects(() => bad.balance.me())).status, 401);
  });

  test('403: city mismatch, and a user calling an admin action', async () => {
    const e = await rejects(() => alice.ai.text({ model: 'stub-model', prompt: 'x', city_id: 'city-b' }));
    assert.deepEqual([e.status, e.type, e.code, e.param], [403, 'permission_error', 'city_mismatch', 'city_id']);
    const f = await rejects(() => alice.call('cities', 'create', { name: 'nope' }));
    assert.deepEqual([f.status, f.code], [403, 'identity_not_allowed']);
  });

  test('402: a priced model without credits; credits added by the admin make it pass', async () => {
    const e = await rejects(() => alice.ai.text({ model: 'aliased', prompt: 'costly' }));
    assert.deepEqual([e.status, e.type, e.code], [402, 'billing_error', 'insufficient_credits']);
    await admin.balance.adjust({ city_id: 'city-a', user_id: 'alice', credits: 5000, reason: 'test', idempotency_key: 'client-402' });
    assert.equal((await alice.ai.text({ model: 'aliased', prompt: 'costly' })).role, 'assistant');
  });

  test('404: unknown model, unknown service, unknown job; 400 names the field; network failure', async () => {
    const e = await rejects(() => alice.ai.text({ model: 'no-such-model', prompt: 'x' }));
    assert.deepEqual([e.status, e.type, e.code, e.param], [404, 'not_found_error', 'model_not_found', 'model']);
    assert.ok(e.requestId?.startsWith('req_'));
    assert.equal((await rejects(() => alice.call('nope', 'x', {}))).code, 'service_not_found');
    assert.equal((await rejects(() => alice.ai.imageResult({ job_id: 'img_missing' }))).status, 404);
    const bad = await rejects(() => alice.ai.text({ model: 'stub-model', prompt: '' }));
    assert.deepEqual([bad.status, bad.code, bad.param], [400, 'invalid_input', 'prompt']);
    const down = createClient({ baseURL: 'http://127.0.0.1:9', token: 'x' });
    assert.deepEqual(await rejects(() => down.ai.models()).then((x) => [x.status, x.code]), [0, 'network_error']);
  });
});

describe('admin and bureau side', () => {
  test('cities, tokens, env, bureaus, models (admin view)', async () => {
    const c = await admin.cities.create({ name: 'SDK city', city_id: 'sdk' });
    assert.equal(c.status, 'active');
    assert.ok((await admin.cities.list()).items.some((x) => x.city_id === 'sdk'));
    assert.equal((await admin.cities.pause({ city_id: 'sdk' })).status, 'paused');
    assert.equal((await admin.cities.activate({ city_id: 'sdk' })).status, 'active');
    assert.equal((await admin.cities.get({ city_id: 'sdk' })).name, 'SDK city');
    const t = await admin.tokens.apply({ city_id: 'sdk', user_id: 'zoe' });
    const zoe = createClient({ baseURL: w.gw.url, token: t.user_token });
    assert.equal((await zoe.cities.current()).city_id, 'sdk');

    await admin.env.upsert({ key: 'SDK_SETTING', value: 'on' });
    await admin.env.import({ content: 'SDK_A=1\nSDK_B=2\n' });
    const keys = (await admin.env.list()).items.map((e) => e.key);
    for (const k of ['SDK_SETTING', 'SDK_A', 'SDK_B']) assert.ok(keys.includes(k));
    assert.equal((await admin.env.remove({ key: 'SDK_A' })).removed, true);
    assert.equal((await rejects(() => admin.env.remove({ key: 'SDK_A' }))).code, 'env_key_not_found');

    const models = await admin.ai.models();
    assert.ok(models.items.every((m) => 'env_requirements' in m));

    const b = await admin.bureaus.create({ city_id: 'sdk', name: 'backend' });
    assert.match(b.bureau_token, /^cg_bureau_/);
    assert.equal((await admin.bureaus.list({ city_id: 'sdk' })).items.length, 1);
    const bureau = createAdminClient({ baseURL: w.gw.url, bureauToken: b.bureau_token });
    assert.deepEqual((await bureau.cities.list()).items.map((x) => x.city_id), ['sdk']);
    assert.equal((await bureau.tokens.apply({ city_id: 'sdk', user_id: 'yan' })).user_id, 'yan');
    assert.ok((await bureau.accounts.users({})).items.some((u) => u.user_id === 'yan'));
    assert.deepEqual(await rejects(() => bureau.tokens.apply({ city_id: 'city-a', user_id: 'x' })).then((e) => [e.status, e.code]), [403, 'city_mismatch']);
    assert.deepEqual(await rejects(() => bureau.env.list()).then((e) => [e.status, e.code]), [403, 'identity_not_allowed']);
    await admin.bureaus.revoke({ bureau_id: b.bureau_id });
    assert.equal((await rejects(() => bureau.cities.list())).status, 401);
    await admin.cities.remove({ city_id: 'sdk' });
    assert.equal((await rejects(() => admin.cities.get({ city_id: 'sdk' }))).code, 'city_not_found');
  });

  test('users, balances, ledger, payments, usage reports', async () => {
    assert.ok((await admin.accounts.users({ city_id: 'city-a' })).items.some((u) => u.user_id === 'alice'));
    const adj = await admin.balance.adjust({ city_id: 'city-a', user_id: 'bob2', credits: 42, reason: 'gift', idempotency_key: 'sdk-gift' });
    assert.deepEqual([adj.credits, adj.replayed], [42, false]);
    const again = await admin.balance.adjust({ city_id: 'city-a', user_id: 'bob2', credits: 42, reason: 'gift', idempotency_key: 'sdk-gift' });
    assert.equal(again.replayed, true);
    assert.equal((await rejects(() => admin.balance.adjust({ city_id: 'city-a', user_id: 'bob2', credits: -100, reason: 'x', idempotency_key: 'sdk-neg' }))).status, 409);
    assert.ok((await admin.balance.list({ city_id: 'city-a' })).items.some((b) => b.user_id === 'bob2' && b.credits === 42));
    assert.equal((await admin.balance.ledger({ city_id: 'city-a', user_id: 'bob2' })).items[0].kind, 'adjust');
    const pays = await admin.payments.list({ city_id: 'city-a' });
    assert.ok(pays.items.length >= 1);
    const synced = await admin.payments.sync({ payment_id: pays.items[0].payment_id });
    assert.equal(synced.payment_id, pays.items[0].payment_id);
    assert.ok((await admin.usage.list({ city_id: 'city-a' })).items.length > 0);
    const sum = await admin.usage.summary({ city_id: 'city-a' });
    assert.ok(sum.totals.calls > 0);
  });

  test('mcp servers: create, list, update, remove; a private URL is a typed 400 naming url', async () => {
    const refused = await rejects(() => admin.mcp.servers.create({ city_id: 'city-a', name: 'local', url: 'http://127.0.0.1:9/mcp' }));
    assert.deepEqual([refused.status, refused.code, refused.param], [400, 'url_refused', 'url']);
    const s = await admin.mcp.servers.create({ city_id: 'city-a', name: 'search', url: 'https://tools.example.com/mcp', auth: { type: 'headers', headers: { 'x-api-key': 'sdk-upstream-secret' } }, price: 5 });
    assert.deepEqual(s.auth, { type: 'headers', header_names: ['x-api-key'] });
    const u = await admin.mcp.servers.update({ server_id: s.server_id, allowed_tools: ['web'], prices: { web: 7 } });
    assert.deepEqual([u.allowed_tools, u.prices], [['web'], { web: 7 }]);
    assert.deepEqual((await admin.mcp.servers.list({ city_id: 'city-a' })).items.map((x) => x.name), ['search']);
    assert.equal((await admin.mcp.servers.remove({ server_id: s.server_id })).removed, true);
  });
});

describe('contract', () => {
  test('every JSON answer the clients got matches the response schema the document declares', () => {
    const ajv = addFormats.default(new Ajv2020({ strict: false }));
    let checked = 0;
    for (const [path, status, body] of answers) {
      if (path === '/v1/nope/x') {
        // The typed-error test's deliberate unknown service: no path to document, but the
        // answer is a 404 in the one documented error shape.
        assert.equal(status, 404);
        assert.ok(ajv.validate({ ...doc.components.schemas.Error, $defs: undefined }, body), JSON.stringify(body));
        continue;
      }
      // Every path the clients called is documented: an undocumented answer is a failure, not a skip.
      const op = doc.paths[path] && (Object.values(doc.paths[path])[0] as any);
      assert.ok(op, `${path} (status ${status}) is not in /openapi.json`);
      const schema = op.responses[String(status)]?.content?.['application/json']?.schema;
      assert.ok(schema, `${path}: status ${status} is not documented`);
      const full = schema.$ref ? { ...doc.components.schemas.Error, $defs: undefined } : schema;
      const v = ajv.compile(full);
      assert.ok(v(body), `${path} ${status}: ${JSON.stringify(v.errors)} in ${JSON.stringify(body).slice(0, 300)}`);
      checked++;
    }
    assert.ok(checked > 40, `only ${checked} answers checked`);
  });

  test('the client is browser-, Node- and Workers-safe: no Node imports, server code only as types', () => {
    const dir = join(import.meta.dirname, '../../src/client');
    for (const f of readdirSync(dir)) {
      const src = readFileSync(join(dir, f), 'utf8');
      for (const m of src.matchAll(/^(import|export)\s+(type\s+)?[^'"]*from\s+'([^']+)'/gm)) {
        const [, , typeOnly, spec] = m;
        assert.ok(!spec.startsWith('node:'), `${f} imports ${spec}`);
        if (!typeOnly && !spec.startsWith('./')) assert.fail(`${f}: a runtime import of ${spec} (only ./ files of the client, or import type)`);
      }
      assert.doesNotMatch(src, /\b(process|Buffer|require)\b\s*[.(]/, `${f} uses a Node global`);
    }
  });
});
