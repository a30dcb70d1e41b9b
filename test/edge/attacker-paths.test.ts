// Issue 24's protections on the edge: the stock Worker in workerd (Miniflare) on a local D1.
// Callers' URLs to literal internal addresses and other schemes are 400 input_unreadable before
// any upstream is tried and never cool an upstream down for other cities (a hostname's resolved
// address is the platform's business on Workers: its fetch leaves from Cloudflare's network);
// upstream error text is relayed without secrets; a Stripe event stamped in the future is
// refused; the default cap on a user's AI calls in flight holds; local login is off by default.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { call, client, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startWorker, type TestWorker } from '../helpers/worker.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { signStripePayload, startStripeStub, type StripeStub } from '../stubs/stripe.ts';

const STRIPE_WHSEC = 'whsec_citygate_edge_attacker';
let stub: OpenAIStub;
let stripe: StripeStub;
let canary: Server;
let canaryHits = 0;
let w: TestWorker;
let admin: ReturnType<typeof client>;
let alice: string;
let bob: string;

before(async () => {
  stub = await startOpenAIStub({ streamSlowMs: 200, streamSlowChunks: 300 });
  stripe = await startStripeStub({ webhookSecret: STRIPE_WHSEC });
  canary = createServer((_req, res) => res.end('x'));
  canary.on('connection', () => canaryHits++);
  await new Promise<void>((r) => canary.listen(0, '127.0.0.1', r));
  w = await startWorker({
    vars: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model,stub-stream-slow',
      OPENAI_API_KEY: 'sk-stub',
      OPENAI_BASE_URL: stub.url,
      PAYMENT_A_SECRET_KEY: stripe.apiKey,
      PAYMENT_A_API_BASE: stripe.origin,
      PAYMENT_A_WEBHOOK_SECRET: STRIPE_WHSEC,
      RATE_LIMIT_USER_AI_CALLS: '3',
      BALANCE_INITIAL_CREDITS: '1000000000',
    },
  });
  assert.equal((await call(w.url, 'GET', '/health')).status, 200, w.logs());
  admin = client(w.url, await w.adminKey());
  for (const [city, user] of [['edge-a', 'alice'], ['edge-b', 'bob']]) {
    assert.equal((await admin.post('/v1/cities/create', { name: city, city_id: city })).status, 200);
  }
  alice = (await admin.post('/v1/cities/tokens/apply', { city_id: 'edge-a', user_id: 'alice' })).body.user_token;
  bob = (await admin.post('/v1/cities/tokens/apply', { city_id: 'edge-b', user_id: 'bob' })).body.user_token;
});
after(async () => {
  await w?.stop();
  await stub?.close();
  await stripe?.close();
  canary?.closeAllConnections();
  await new Promise((r) => (canary ? canary.close(r) : r(null)));
});

describe('edge: outbound fetches and breaker poisoning', () => {
  test('literal internal addresses and other schemes: 400 before any upstream; 30 of them leave the model callable for another city', async () => {
    const port = (canary.address() as AddressInfo).port;
    const urls = [`http://127.0.0.1:${port}/x.png`, `http://[::ffff:7f00:1]:${port}/x.png`, `http://localhost:${port}/x.png`, 'http://169.254.169.254/latest/meta-data/', 'file:///etc/passwd'];
    const chats = () => stub.requests.filter((r) => r.path === '/v1/chat/completions').length;
    const before = chats();
    for (let i = 0; i < 30; i++) {
      const url = urls[i % urls.length];
      const r = await call(w.url, 'POST', '/v1/ai/text', { token: alice, body: { model: 'stub-model', messages: [{ role: 'user', content: [{ type: 'text', text: 'what' }, { type: 'image_url', image_url: { url } }] }] } });
      assert.equal(r.status, 400, `${url}: ${r.text}`);
      assert.equal(errorOf(r).code, 'input_unreadable', url);
    }
    const asr = await call(w.url, 'POST', '/v1/ai/asr', { token: alice, body: { model: 'openai/whisper-1', url: `https://127.0.0.1:${port}/a.wav` } });
    assert.equal(asr.status, 400, asr.text);
    assert.equal(errorOf(asr).code, 'audio_unreadable');
    assert.equal(canaryHits, 0, 'nothing reached the canary');
    assert.equal(chats(), before, 'no upstream was tried');
    const other = await call(w.url, 'POST', '/v1/ai/chat/completions', { token: bob, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
    assert.equal(other.status, 200, other.text);
  });
});

describe('edge: defaults that protect', () => {
  test('a user past RATE_LIMIT_USER_AI_CALLS calls in flight gets 429; another user is served', async () => {
    const open = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const res = await fetch(`${w.url}/v1/ai/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stub-stream-slow', stream: true, messages: [{ role: 'user', content: 'go' }] }) });
        if (res.status !== 200) assert.fail(`${res.status} ${await res.text()}`);
        const reader = res.body!.getReader();
        await reader.read();
        return reader;
      }),
    );
    const over = await call(w.url, 'POST', '/v1/ai/chat/completions', { token: alice, body: { model: 'stub-model', messages: [{ role: 'user', content: 'more' }] } });
    assert.equal(over.status, 429, over.text);
    assert.equal(errorOf(over).code, 'rate_limited');
    assert.equal((await call(w.url, 'POST', '/v1/ai/chat/completions', { token: bob, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } })).status, 200);
    await Promise.all(open.map((r) => r.cancel()));
    // the client went away: the Worker ends the calls and the user is served again
    await until('alice served again', async () => (await call(w.url, 'POST', '/v1/ai/chat/completions', { token: alice, body: { model: 'stub-model', messages: [{ role: 'user', content: 'again' }] } })).status === 200, 10_000);
  });

  test('a Stripe event stamped an hour in the future is refused', async () => {
    const raw = JSON.stringify({ id: 'evt_future', type: 'checkout.session.completed', data: { object: { id: 'cs_nothing' } } });
    const r = await call(w.url, 'POST', '/v1/payment/webhook/a', { raw, headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(raw, STRIPE_WHSEC, Math.floor(Date.now() / 1000) + 3600) } });
    assert.equal(r.status, 400, r.text);
    assert.equal(errorOf(r).code, 'invalid_signature');
  });

  test('local login is off by default on the edge', async () => {
    const r = await call(w.url, 'POST', '/v1/accounts/login', { body: { city_id: 'edge-a', user_id: 'alice' } });
    assert.equal(r.status, 403, r.text);
    assert.equal(errorOf(r).code, 'local_login_disabled');
  });

  test('an upstream echoing keys: the error relayed without them', async () => {
    const adminKey = await w.adminKey();
    stub.setFault({ status: 400, message: `Incorrect API key provided: Bearer sk-stub-echoed-0123456789 (admin ${adminKey}, caller ${bob})` });
    try {
      for (const stream of [false, true]) {
        const r = await call(w.url, 'POST', '/v1/ai/chat/completions', { token: bob, body: { model: 'stub-model', stream, messages: [{ role: 'user', content: 'hi' }] } });
        assert.equal(r.status, 400, r.text);
        assert.match(r.text, /Incorrect API key provided/);
        for (const s of ['sk-stub-echoed', adminKey, bob]) assert.ok(!r.text.includes(s), `leaked: ${r.text}`);
      }
    } finally {
      stub.setFault(null);
    }
  });
});
