// The upstream deadline (AI_UPSTREAM_TIMEOUT_MS), on its own gateway: a short deadline
// against an upstream that answers far later, so the 504 does not depend on machine load,
// while the other ai suites run with a realistic deadline.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, client, errorOf } from '../helpers/http.ts';
import { startAiWorld, type AiWorld } from './setup.ts';

let w: AiWorld;
before(async () => {
  w = await startAiWorld({ env: { AI_UPSTREAM_TIMEOUT_MS: '1000' }, stub: { slowMs: 60_000 } });
});
after(() => w?.close());

const chat = (extra: object = {}) =>
  call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'stub-slow', messages: [{ role: 'user', content: 'x' }], ...extra } });

test('an upstream slower than the deadline → 504 upstream_timeout, JSON, stream and /v1/ai/text', async () => {
  const started = Date.now();
  const r = await chat();
  assert.equal(r.status, 504, r.text);
  assert.equal(errorOf(r).code, 'upstream_timeout');
  assert.ok(Date.now() - started < 30_000, 'the deadline cut the call, not the upstream');
  const s = await chat({ stream: true });
  assert.equal(s.status, 504, s.text);
  assert.equal(errorOf(s).code, 'upstream_timeout');
  const t = await client(w.gw.url, w.alice).post('/v1/ai/text', { model: 'stub-slow', prompt: 'x' });
  assert.equal(t.status, 504);
  assert.equal(errorOf(t).code, 'upstream_timeout');
});

test('a fast upstream under the same deadline answers 200', async () => {
  const r = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
  assert.equal(r.status, 200, r.text);
});
