// RATE_LIMIT_USER_CONCURRENCY (issue 15): a user's request in flight — a slow answer, or a
// stream until its last chunk — holds a slot; one more gets 429 rate_limited; the slot is free
// again once the answer has been sent; other users are not affected.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

let stub: OpenAIStub;
let gw: TestGateway;
let admin: ReturnType<typeof client>;

before(async () => {
  stub = await startOpenAIStub({ slowMs: 2500, streamSlowMs: 150, streamSlowChunks: 15 });
  gw = await startGateway({
    env: { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model,stub-slow,stub-stream-slow', RATE_LIMIT_USER_CONCURRENCY: '1', AI_UPSTREAM_TIMEOUT_MS: '20000' },
  });
  admin = client(gw.url, gw.adminKey);
  await admin.post('/v1/cities/create', { name: 'cc', city_id: 'cc' });
});
after(async () => {
  await gw?.stop();
  await stub?.close();
});

const token = async (u: string) => (await admin.post('/v1/cities/tokens/apply', { city_id: 'cc', user_id: u })).body.user_token as string;
const chat = (t: string, model: string, stream = false) =>
  call(gw.url, 'POST', '/v1/ai/chat/completions', { token: t, body: { model, stream, messages: [{ role: 'user', content: 'hello' }] } });

test('a slow call holds the user’s one slot: a second call gets 429 until it has answered; another user is not limited', async () => {
  const alice = await token('alice');
  const seen = stub.requestCount;
  const slow = chat(alice, 'stub-slow');
  await until('the slow call to reach the upstream', () => stub.requestCount > seen);
  const second = await chat(alice, 'stub-model');
  assert.equal(second.status, 429, second.text);
  assert.equal(errorOf(second).code, 'rate_limited');
  assert.ok(Number(second.headers.get('retry-after')) >= 1);
  assert.equal((await chat(await token('bob'), 'stub-model')).status, 200, 'another user has their own slot');
  assert.equal((await slow).status, 200);
  await until('the slot to be free again', async () => (await chat(alice, 'stub-model')).status === 200, 5000);
});

test('a stream holds the slot until its last chunk has been sent', async () => {
  const carol = await token('carol');
  const res = await fetch(`${gw.url}/v1/ai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${carol}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'stub-stream-slow', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read(); // the stream has started
  assert.equal((await chat(carol, 'stub-model')).status, 429, 'the stream still holds the slot');
  while (!(await reader.read()).done) {
    /* drain */
  }
  await until('the slot to be free after the stream', async () => (await chat(carol, 'stub-model')).status === 200, 5000);
});
