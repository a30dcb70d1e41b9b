// SIGTERM stops the server gracefully: requests in flight finish, then the process exits 0.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub } from '../stubs/openai.ts';

test('SIGTERM lets an in-flight request finish, refuses new connections, and exits 0', async () => {
  const stub = await startOpenAIStub({ slowMs: 3000 });
  const gw = await startGateway({
    env: { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-slow' },
  });
  try {
    const admin = client(gw.url, gw.adminKey);
    await admin.post('/v1/cities/create', { name: 'S', city_id: 's' });
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 's', user_id: 'u' })).body.user_token;
    const inFlight = fetch(`${gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stub-slow', messages: [{ role: 'user', content: 'wait for me' }] }),
    });
    await until('the request reached the upstream', () => stub.requestCount === 1, 30_000);
    const exited = gw.stop('SIGTERM');
    const res = await inFlight;
    assert.equal(res.status, 200);
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    assert.match(body.choices[0].message.content, /wait for me/);
    assert.equal(await exited, 0);
    await assert.rejects(fetch(`${gw.url}/health`), 'no longer listening');
  } finally {
    await gw.stop();
    await stub.close();
  }
});
