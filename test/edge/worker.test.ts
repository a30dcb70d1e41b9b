// The gateway as a Cloudflare Worker, run by workerd through Miniflare with a local D1
// (persisted to a temporary directory), a local queue consumed by the same Worker and a
// local R2 bucket. Black-box over HTTP, the same checks as the Node server.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { join } from 'node:path';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client, errorOf } from '../helpers/http.ts';
import { readFileSync } from 'node:fs';
import { GoogleGenAI } from '@google/genai';
import { bundleWorker, nodeBuiltinImports, startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, stubVector, type OpenAIStub } from '../stubs/openai.ts';
import { startAnthropicStub, type AnthropicStub } from '../stubs/anthropic.ts';
import { startGitHubStub } from '../stubs/github.ts';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { R2BlobStore } from '../../src/runtimes/workers/r2.ts';
import { conformance } from './conformance.ts';
import { until } from '../helpers/wait.ts';

const PROBE_ENTRY = join(import.meta.dirname, 'fixtures/probe-worker.ts');


let bundle: string;
let stub: OpenAIStub;
let claude: AnthropicStub;
before(async () => {
  bundle = await bundleWorker(PROBE_ENTRY);
  stub = await startOpenAIStub({ slowMs: 1500 });
  claude = await startAnthropicStub();
});
after(async () => {
  await stub?.close();
  await claude?.close();
});

describe('Worker in workerd (Miniflare, local D1/Queues/R2)', () => {
  let w: TestWorker;
  let adminKey: string;

  before(async () => {
    // Provider keys as Worker vars (the "process env"); the env table still comes first.
    w = await startWorker({
      bundle,
      storage: true,
      vars: {
        TEXTPROVIDER_API_KEY: 'sk-stub',
        TEXTPROVIDER_BASE_URL: stub.url,
        TEXTPROVIDER_MODELS: 'stub-model',
        OPENAI_API_KEY: 'sk-stub',
        OPENAI_BASE_URL: stub.url,
        AI_VIDEO_POLL_MS: '50',
        GATEWAY_CITY_BASE_URL: 'https://from-a-var.example.com',
        CLAUDE_STUB_KEY: claude.apiKey,
        CLAUDE_STUB_URL: claude.url,
      },
    });
    // Seed §1: the first GET /health initializes the service.
    const h = await call(w.url, 'GET', '/health');
    assert.equal(h.status, 200, w.logs());
    adminKey = await w.adminKey();
  });
  after(() => w?.stop());

  test('the first /health created the built-in tables, the admin key and the signing key in D1', async () => {
    const tables = (await w.sql<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table'`)).map((r) => r.name);
    for (const t of ['env', 'cities', 'signing_keys', '_migrations']) assert.ok(tables.includes(t), `table ${t}`);
    assert.match(adminKey, /^cg_admin_/);
    assert.equal((await w.sql(`SELECT kid FROM signing_keys WHERE status = 'active'`)).length, 1);
    const h = await call(w.url, 'GET', '/health');
    assert.deepEqual(h.body.services.slice(0, 2), ['env', 'cities']);
  });

  for (const [name, check] of Object.entries(conformance)) {
    test(name, () => check({ url: w.url, adminKey }));
  }

  test('env written through the API is what an operator reads with SQL', async () => {
    await client(w.url, adminKey).post('/v1/env/upsert', { key: 'GATEWAY_CITY_BASE_URL', value: 'https://city.example.com' });
    const rows = await w.sql<{ value: string }>(`SELECT value FROM env WHERE key = ?`, 'GATEWAY_CITY_BASE_URL');
    assert.equal(rows[0]?.value, 'https://city.example.com');
  });

  test('a job goes through the local queue to the same Worker (and a RetryJob is retried)', async () => {
    const admin = client(w.url, adminKey);
    assert.equal((await admin.post('/v1/probe/jobs/enqueue', { id: 'j1' })).status, 200);
    assert.equal((await admin.post('/v1/probe/jobs/enqueue', { id: 'j2', retry_first: true })).status, 200);
    const state = (id: string) => admin.get(`/v1/probe/state?key=PROBE_JOB_${id.toUpperCase()}`).then((r) => r.body.value as string);
    await until('job j1', async () => (await state('j1')) === 'done');
    await until('job j2 after a retry', async () => (await state('j2')) === 'done-after-retry');
  });

  test('R2 stores media behind the BlobStore, with the public URL prefix', async () => {
    const admin = client(w.url, adminKey);
    const put = await admin.post('/v1/probe/blob/put', { key: 'img/a b.png', text: 'PNG…', content_type: 'image/png' });
    assert.equal(put.status, 200);
    assert.deepEqual(put.body, { stored: true, public_url: null }, 'no public URL prefix declared: files go through the gateway');
    const got = await call(w.url, 'GET', `/v1/probe/blob/get?key=${encodeURIComponent('img/a b.png')}`, { token: adminKey });
    assert.equal(got.status, 200);
    assert.equal(got.headers.get('content-type'), 'image/png');
    assert.equal(got.text, 'PNG…');
  });

  test('background work outlives the response (ctx.waitUntil)', async () => {
    const admin = client(w.url, adminKey);
    const r = await admin.post('/v1/probe/background', { id: 'bg1' });
    assert.deepEqual(r.body, { accepted: 'bg1' });
    await until('background write', async () => (await admin.get('/v1/probe/state?key=PROBE_BG_BG1')).body.value === 'done');
  });

  describe('ai on the edge, against the stub upstream', () => {
    let alice: string;
    before(async () => {
      const admin = client(w.url, adminKey);
      await admin.post('/v1/cities/create', { name: 'AI city', city_id: 'ai-a' });
      alice = (await admin.post('/v1/cities/tokens/apply', { city_id: 'ai-a', user_id: 'alice' })).body.user_token;
      // The stock image model has a price: the balance service charges it on the edge too.
      await admin.post('/v1/balance/adjust', { city_id: 'ai-a', user_id: 'alice', credits: 1_000_000, reason: 'test', idempotency_key: 'fund-alice' });
    });

    test('chat/completions: JSON and server-sent events, the provider key upstream', async () => {
      const r = await call(w.url, 'POST', '/v1/ai/chat/completions', {
        token: alice,
        body: { model: 'stub-model', messages: [{ role: 'user', content: 'hello there' }] },
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.object, 'chat.completion');
      assert.equal(r.body.choices[0].message.content, 'Hello from stub: hello there');
      const upstream = [...stub.requests].reverse().find((q) => q.path === '/v1/chat/completions')!;
      assert.equal(upstream.headers.authorization, 'Bearer sk-stub');
      const s = await call(w.url, 'POST', '/v1/ai/chat/completions', {
        token: alice,
        body: { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'one two' }] },
      });
      assert.equal(s.status, 200);
      assert.match(s.headers.get('content-type') ?? '', /text\/event-stream/);
      const text = s.text
        .split('\n')
        .filter((l) => l.startsWith('data: {'))
        .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? '')
        .join('');
      assert.equal(text, 'Hello from stub: one two');
      assert.match(s.text, /data: \[DONE\]/);
    });

    test('the city_id rule with a user token: ai/text for another city → 403', async () => {
      const ok = await client(w.url, alice).post('/v1/ai/text', { model: 'stub-model', prompt: 'hi', city_id: 'ai-a' });
      assert.equal(ok.status, 200, ok.text);
      assert.deepEqual(ok.body.parts, [{ type: 'text', text: 'Hello from stub: hi' }]);
      const r = await client(w.url, alice).post('/v1/ai/text', { model: 'stub-model', prompt: 'hi', city_id: 'city-b' });
      assert.equal(r.status, 403);
      assert.equal(errorOf(r).code, 'city_mismatch');
    });

    test('models: the user view and the admin view', async () => {
      const u = await call(w.url, 'GET', '/v1/ai/models', { token: alice });
      assert.equal(u.status, 200);
      assert.ok(u.body.items.some((m: { id: string }) => m.id === 'stub-model'));
      assert.ok(u.body.items.every((m: object) => !('env_requirements' in m)));
      const a = await call(w.url, 'GET', '/v1/ai/models', { token: adminKey });
      assert.ok(a.body.items.every((m: object) => 'env_requirements' in m));
    });

    test('upstreams as data on D1: a created upstream serves its model, failures fall back, usage names upstream and attempts; /metrics is 501', async () => {
      const admin = client(w.url, adminKey);
      const bad = await admin.post('/v1/ai/upstreams/create', { name: 'edge-bad', kind: 'openai-compatible', base_url: 'http://127.0.0.1:9/v1', api_key: 'sk-edge-secret-0000', models: ['edge-routed'], priority: 0 });
      assert.equal(bad.status, 200, bad.text + w.logs().split('\n').filter((l) => l.includes('error')).slice(-3).join('\n'));
      const good = await admin.post('/v1/ai/upstreams/create', { name: 'edge-good', kind: 'openai-compatible', base_url: stub.url, api_key: 'sk-stub', models: [{ id: 'edge-routed', upstream_model: 'stub-model' }], priority: 1 });
      assert.equal(good.status, 200, good.text);
      const list = await call(w.url, 'GET', '/v1/ai/upstreams/list', { token: adminKey });
      assert.equal(list.status, 200);
      assert.ok(!list.text.includes('sk-edge-secret'), 'the key is write-only');
      const r = await call(w.url, 'POST', '/v1/ai/chat/completions', { token: alice, body: { model: 'edge-routed', messages: [{ role: 'user', content: 'via d1' }] } });
      assert.equal(r.status, 200, r.text + w.logs().split('\n').filter((l) => l.includes('error')).slice(-3).join('\n'));
      assert.equal(r.body.choices[0].message.content, 'Hello from stub: via d1');
      const rec = await until('the usage record', async () => {
        const u = await call(w.url, 'GET', '/v1/usage/list?model=edge-routed', { token: adminKey });
        return u.body.items?.[0];
      });
      assert.deepEqual([rec.upstream, rec.attempts], [good.body.upstream_id, 2]);
      const forbidden = await call(w.url, 'GET', '/v1/ai/upstreams/list', { token: alice });
      assert.equal(forbidden.status, 403);
      const m = await call(w.url, 'GET', '/metrics', { token: adminKey });
      assert.equal(m.status, 501);
      assert.equal(errorOf(m).code, 'metrics_not_supported');
    });

    test('the client APIs: models.list, embeddings, Responses and Messages (plain and streamed) through the official clients', async () => {
      const oa = new OpenAI({ baseURL: `${w.url}/v1/ai`, apiKey: alice, maxRetries: 0 });
      const ids: string[] = [];
      for await (const m of oa.models.list()) ids.push(m.id);
      assert.ok(ids.includes('stub-model') && ids.includes('claude') && ids.includes('openai/text-embedding-3-small'), ids.join());
      const e = await oa.embeddings.create({ model: 'openai/text-embedding-3-small', input: 'edge words' });
      assert.deepEqual(e.data[0].embedding, stubVector('edge words', 1536));
      const r = await oa.responses.create({ model: 'stub-model', input: 'hello edge', instructions: 'sys' });
      assert.equal(r.output_text, 'Hello from stub: hello edge');
      let deltas = '';
      let completed = false;
      for await (const ev of await oa.responses.create({ model: 'stub-model', input: 'streamed edge', stream: true })) {
        if (ev.type === 'response.output_text.delta') deltas += ev.delta;
        if (ev.type === 'response.completed') completed = (ev.response.usage?.output_tokens ?? 0) > 0;
      }
      assert.deepEqual([deltas, completed], ['Hello from stub: streamed edge', true]);
      const an = new Anthropic({ baseURL: `${w.url}/v1/ai`, apiKey: alice, maxRetries: 0 });
      for (const [model, reply] of [['stub-model', 'Hello from stub: hi edge'], ['claude', 'Hello from anthropic stub: hi edge']]) {
        const m = await an.messages.create({ model, max_tokens: 50, messages: [{ role: 'user', content: 'hi edge' }] });
        assert.equal((m.content[0] as Anthropic.TextBlock).text, reply);
        const s = await an.messages.stream({ model, max_tokens: 50, messages: [{ role: 'user', content: 'hi edge' }] }).finalMessage();
        assert.deepEqual([(s.content[0] as Anthropic.TextBlock).text, s.usage.output_tokens > 0], [reply, true]);
      }
      const viaKey = await call(w.url, 'POST', '/v1/ai/v1/messages/count_tokens', { headers: { 'x-api-key': alice }, body: { model: 'claude', messages: [{ role: 'user', content: 'a b c' }] } });
      assert.deepEqual([viaKey.status, viaKey.body.input_tokens], [200, 6]);
      const bad = await call(w.url, 'POST', '/v1/ai/v1/messages', { headers: { 'x-api-key': 'nope' }, body: { model: 'claude', max_tokens: 5, messages: [] } });
      assert.deepEqual([bad.status, bad.body.type, bad.body.error?.type], [401, 'error', 'authentication_error']);
      // every call metered with its mode (the priced embedding model charged too)
      const modes = await until('usage records', async () => {
        const items = (await client(w.url, alice).get('/v1/usage/me?limit=200')).body.items as { mode: string; credits: number; model: string }[];
        const m = new Set(items.map((i) => i.mode));
        return m.has('embeddings') && m.has('responses') && items.filter((i) => i.mode === 'messages').length >= 4 ? items : null;
      });
      assert.ok(modes.some((i) => i.mode === 'embeddings' && i.credits === 1));
    });

    test('Google’s Gemini API through @google/genai (the SDK’s v1 under /v1/ai), plain and streamed; ?key= at /v1beta and the JSON-array stream; Google-shaped 401', async () => {
      const ai = new GoogleGenAI({ apiKey: alice, httpOptions: { baseUrl: `${w.url}/v1/ai` } });
      const r = await ai.models.generateContent({ model: 'stub-model', contents: 'hi gemini', config: { systemInstruction: 'sys' } });
      assert.deepEqual([r.text, (r.usageMetadata?.candidatesTokenCount ?? 0) > 0], ['Hello from stub: hi gemini', true]);
      let text = '';
      for await (const c of await ai.models.generateContentStream({ model: 'stub-model', contents: 'streamed gemini' })) text += c.text ?? '';
      assert.equal(text, 'Hello from stub: streamed gemini');
      const arr = await call(w.url, 'POST', `/v1beta/models/stub-model:streamGenerateContent?key=${alice}`, { body: { contents: [{ parts: [{ text: 'array' }] }] } });
      assert.equal(arr.status, 200, arr.text);
      assert.equal(JSON.parse(arr.text).map((x: any) => x.candidates[0].content.parts[0]?.text ?? '').join(''), 'Hello from stub: array');
      const bad = await call(w.url, 'POST', '/v1beta/models/stub-model:generateContent?key=nope', { body: { contents: [{ parts: [{ text: 'x' }] }] } });
      assert.deepEqual([bad.status, bad.body.error?.code, bad.body.error?.status], [401, 401, 'UNAUTHENTICATED']);
      await until('three gemini records', async () => ((await client(w.url, alice).get('/v1/usage/me?limit=200')).body.items as { mode: string }[]).filter((i) => i.mode === 'gemini').length >= 3 || null);
    });

    test('an image job completes through the local queue; the file is served from R2 through the gateway', async () => {
      const u = client(w.url, alice);
      const created = await u.post('/v1/ai/image/create', { model: 'openai/gpt-image-1', prompt: 'a cat' });
      assert.equal(created.status, 200, created.text);
      const job = await until('image job', async () => {
        const r = await u.post('/v1/ai/image/result', { job_id: created.body.job_id });
        return r.body.status === 'succeeded' || r.body.status === 'failed' ? r.body : null;
      });
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      // GATEWAY_CITY_BASE_URL is the public origin: the env table's value (set above) wins
      // over the Worker var. The path is the gateway's.
      const url = new URL(job.images[0].url as string);
      assert.equal(url.origin, 'https://city.example.com');
      assert.ok(url.pathname.startsWith('/v1/ai/files/'), url.pathname);
      const file = await fetch(w.url + url.pathname);
      assert.equal(file.status, 200);
      assert.equal(file.headers.get('content-type'), 'image/png');
      const bytes = new Uint8Array(await file.arrayBuffer());
      assert.deepEqual([...bytes.slice(1, 4)], [0x50, 0x4e, 0x47], 'PNG');
      const keys = await w.mf.getR2Bucket('MEDIA').then((b) => b.list());
      assert.ok(keys.objects.some((o) => url.pathname.endsWith(o.key)));
    });
  });

  test('a video job polls the upstream through re-sent queue messages (RetryJob) until done', async () => {
    const admin = client(w.url, adminKey);
    await admin.post('/v1/cities/create', { name: 'Video city', city_id: 'vid-a' });
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'vid-a', user_id: 'v' })).body.user_token;
    const u = client(w.url, token);
    const created = await u.post('/v1/ai/video', { model: 'stub-video', prompt: 'waves', seconds: 2 });
    assert.equal(created.status, 200, created.text);
    const job = await until(
      'video job',
      async () => {
        const r = await u.post('/v1/ai/video', { job_id: created.body.job_id });
        return r.body.status === 'succeeded' || r.body.status === 'failed' ? r.body : null;
      },
      20_000,
    );
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.videos[0].media_type, 'video/mp4');
  });

  test('OAuth login in the Worker: arctic, loaded on the first login, does PKCE and the code exchange', async () => {
    const gh = await startGitHubStub();
    try {
      const admin = client(w.url, adminKey);
      const base = (await admin.get('/v1/env/list?reveal=true')).body.items.find((e: { key: string }) => e.key === 'GATEWAY_CITY_BASE_URL').value as string;
      const callback = `${new URL(base).origin}/v1/accounts/oauth/callback`;
      gh.setRedirectUri(callback);
      gh.setUser({ id: 777, login: 'edge-user', email: 'edge@example.com', email_verified: true });
      const env = { OAUTH_A_CLIENT_ID: gh.clientId, OAUTH_A_CLIENT_SECRET: gh.clientSecret, OAUTH_A_AUTHORIZE_URL: gh.authorizeUrl, OAUTH_A_TOKEN_URL: gh.tokenUrl, OAUTH_A_API_URL: gh.apiBase };
      const content = Object.entries(env).map(([k, v]) => `${k}=${v}`).join('\n');
      assert.equal((await admin.post('/v1/env/import', { content })).status, 200);
      await admin.post('/v1/cities/create', { name: 'OAuth city', city_id: 'oauth-edge' });
      const started = await call(w.url, 'POST', '/v1/accounts/oauth/start', { body: { city_id: 'oauth-edge', provider: 'github' } });
      assert.equal(started.status, 200, started.text);
      const at = await fetch(started.body.url, { redirect: 'manual' });
      assert.equal(at.status, 302, await at.text());
      const back = new URL(at.headers.get('location')!);
      assert.equal(`${back.origin}${back.pathname}`, callback);
      assert.equal(gh.requests.at(-1)!.query.code_challenge_method, 'S256');
      // the browser arrives at the public host, which routes to this Worker
      const arrived = await fetch(`${w.url}${back.pathname}${back.search}`, { redirect: 'manual' });
      assert.equal(arrived.status, 200, await arrived.text());
      const result = await call(w.url, 'GET', `/v1/accounts/oauth/result?state=${encodeURIComponent(started.body.state)}`);
      assert.equal(result.body.status, 'done', result.text);
      assert.equal(gh.tokenCalls, 1);
      const me = await call(w.url, 'GET', '/v1/cities/current', { token: result.body.user_token });
      assert.equal(me.body.city_id, 'oauth-edge');
    } finally {
      await gh.close();
    }
  });

  test('data survives a restart of the Worker on the same D1 state directory', async () => {
    const admin = client(w.url, adminKey);
    await admin.post('/v1/cities/create', { name: 'Durable', city_id: 'durable' });
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'durable', user_id: 'u' })).body.user_token as string;
    w = await w.restart();
    assert.equal(await w.adminKey(), adminKey, 'same admin key');
    const again = client(w.url, adminKey);
    const list = await again.get('/v1/cities/list');
    assert.equal(list.status, 200);
    assert.ok(list.body.items.some((c: { city_id: string }) => c.city_id === 'durable'));
    // The signing key survived too: a token issued before the restart still verifies
    // (a user token is refused by admin routes with 403, not 401).
    assert.equal((await call(w.url, 'GET', '/v1/cities/list', { token })).status, 403);
    assert.equal((await again.get('/v1/env/list?reveal=true')).body.items.find((e: { key: string }) => e.key === 'GATEWAY_CITY_BASE_URL')?.value, 'https://city.example.com');
  });
});

test('shared code uses no Node-only API: the wrangler bundle (no nodejs_compat) imports no node: module', () => {
  assert.deepEqual(nodeBuiltinImports(readFileSync(bundle, 'utf8')), []);
  // The detector itself finds what wrangler leaves external.
  assert.deepEqual(nodeBuiltinImports('import { readFileSync } from "node:fs";\nconst x = await import("node:sqlite");'), ['node:fs', 'node:sqlite']);
});

test('R2BlobStore: public URLs from the declared prefix, key segments encoded', () => {
  const bucket = { put: async () => null, get: async () => null, delete: async () => {}, list: async () => ({ objects: [], truncated: false }) };
  assert.equal(new R2BlobStore(bucket, 'https://media.example.com/').publicUrl('ai/x y.png'), 'https://media.example.com/ai/x%20y.png');
  assert.equal(new R2BlobStore(bucket, null).publicUrl('ai/x.png'), null);
});

describe('cold start', () => {
  test('two requests at once on a cold Worker (and a second isolate) create one admin key and one signing key', async () => {
    const w = await startWorker({ bundle, secondIsolate: true });
    try {
      const [a, b, c] = await Promise.all([
        call(w.url, 'GET', '/health'),
        call(w.url, 'GET', '/health'),
        w.second('/health'),
      ]);
      assert.equal(a.status, 200);
      assert.equal(b.status, 200);
      assert.equal(c.status, 200);
      await c.text();
      assert.equal((await w.sql(`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`)).length, 1);
      assert.equal((await w.sql(`SELECT kid FROM signing_keys WHERE status = 'active'`)).length, 1);
      const key = await w.adminKey();
      // Both isolates accept the one key and sign with the one signing key.
      assert.equal((await call(w.url, 'GET', '/v1/cities/list', { token: key })).status, 200);
      const second = await w.second('/v1/cities/list', { headers: { authorization: `Bearer ${key}` } });
      assert.equal(second.status, 200);
      await second.text();
    } finally {
      await w.stop();
    }
  });
});

describe('Node server (the same checks)', () => {
  let g: TestGateway;
  before(async () => {
    g = await startGateway();
  });
  after(() => g?.stop());
  for (const [name, check] of Object.entries(conformance)) {
    test(name, () => check({ url: g.url, adminKey: g.adminKey }));
  }
});
