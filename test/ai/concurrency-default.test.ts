// One user cannot hold every stream: by default a user has at most 64 AI calls in flight (per
// process); the 65th is 429 rate_limited while other users are served, and a city's own
// `user_concurrency` replaces the default (here: raises it).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, errorOf } from '../helpers/http.ts';
import { RICH_USERS, startAiWorld, type AiWorld } from './setup.ts';

let w: AiWorld;
before(async () => {
  w = await startAiWorld({ stub: { streamSlowMs: 200, streamSlowChunks: 300 }, env: RICH_USERS });
});
after(() => w?.close());

/** Starts a slow stream (a minute long) and resolves once its first bytes arrived. */
async function openStream(token: string) {
  const res = await fetch(`${w.gw.url}/v1/ai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'stub-stream-slow', stream: true, messages: [{ role: 'user', content: 'go' }] }),
  });
  if (res.status !== 200) assert.fail(`${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  await reader.read();
  return { cancel: () => reader.cancel() };
}

test('the 65th concurrent stream of one user is 429; another user is served; once they end (the client closes them), the user is served again', async () => {
  const open = await Promise.all(Array.from({ length: 64 }, () => openStream(w.alice)));
  const over = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'stub-model', messages: [{ role: 'user', content: 'one more' }] } });
  assert.equal(over.status, 429, over.text);
  assert.equal(errorOf(over).code, 'rate_limited');
  assert.match(errorOf(over).message, /at most 64/);
  const other = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.bob, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
  assert.equal(other.status, 200, other.text);
  await Promise.all(open.map((s) => s.cancel()));
  await new Promise((r) => setTimeout(r, 300)); // the gateway sees the clients go
  const again = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'stub-model', messages: [{ role: 'user', content: 'again' }] } });
  assert.equal(again.status, 200, again.text);
});

test("a city's user_concurrency replaces the default: raised to 80, 70 streams at once are served", async () => {
  const up = await w.admin.post('/v1/cities/update', { city_id: 'city-b', limits: { user_concurrency: 80 } });
  assert.equal(up.status, 200, up.text);
  const open = await Promise.all(Array.from({ length: 70 }, () => openStream(w.bob)));
  await Promise.all(open.map((s) => s.cancel()));
});
