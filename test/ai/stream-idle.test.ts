// A stream whose upstream sends its first event and then nothing: ended after
// AI_STREAM_IDLE_TIMEOUT_MS with its API's error event, one usage record, charged once by the
// estimate rules (docs/money.md), its credit hold returned. Every streamed API: chat/completions
// (pass-through), /v1/ai/stream (AI SDK), Responses and Messages translated to chat/completions,
// and Messages forwarded to an Anthropic upstream.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { readWithPause } from '../helpers/http.ts';
import { row } from '../money/setup.ts';
import { startApiWorld, type ApiWorld } from './apis-setup.ts';

const IDLE_MS = 800;
let w: ApiWorld;
before(async () => {
  w = await startApiWorld({ env: { AI_STREAM_IDLE_TIMEOUT_MS: String(IDLE_MS) } });
  w.openai.setFault({ stallStream: true });
  w.anthropic.setFault({ stallStream: true });
});
after(() => w?.close());

const chat = { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'one two three' }] };
const cases: [string, string, object][] = [
  ['chat/completions', '/v1/ai/chat/completions', chat],
  ['/v1/ai/stream', '/v1/ai/stream', { model: 'stub-model', messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'one two three' }] }] }],
  ['Responses (translated)', '/v1/ai/responses', { model: 'stub-model', stream: true, input: 'one two three' }],
  ['Messages (translated)', '/v1/ai/messages', { model: 'stub-model', stream: true, max_tokens: 50, messages: [{ role: 'user', content: 'one two three' }] }],
  ['Messages (forwarded)', '/v1/ai/messages', { model: 'claude', stream: true, max_tokens: 50, messages: [{ role: 'user', content: 'one two three' }] }],
];

for (const [name, path, body] of cases) {
  test(`${name}: a stream that stalls after its first event ends after the idle deadline, charged once`, async () => {
    const t = await w.user(name.replace(/\W+/g, '').toLowerCase());
    const b0 = await w.balance(t);
    const started = Date.now();
    const res = await fetch(`${w.gw.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t}`, 'x-api-key': t, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000), // before the fix the stream never ends
    });
    assert.equal(res.status, 200);
    const text = await res.text(); // ends only when citygate ends the stream
    const took = Date.now() - started;
    assert.ok(took >= IDLE_MS - 50 && took < IDLE_MS + 8000, `ended after ${took} ms`);
    assert.match(text, /AI_STREAM_IDLE_TIMEOUT_MS/, `the API's error event says why: ${text.slice(-400)}`);
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.status, rec.error_code, rec.estimated], ['error', 'upstream_stream_idle', true], JSON.stringify(rec));
    assert.ok(rec.credits > 0, 'charged the estimate of what was relayed');
    assert.equal(await w.balanceBecomes(t, b0 - rec.credits), b0 - rec.credits, 'charged once, the record’s credits');
    await new Promise((r) => setTimeout(r, 300)); // a few flush windows: nothing more lands
    assert.equal(await w.balance(t), b0 - rec.credits);
    assert.equal((await w.records(t, 1)).length, 1, 'one record');
    const { city, user } = w.owner(t);
    const leased = async () => Number((await row<{ l: number }>(w.gw, 'SELECT COALESCE(SUM(leased), 0) AS l FROM balances WHERE city_id = ? AND user_id = ?', [city, user])).l);
    for (const end = Date.now() + 10_000; (await leased()) !== 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 100));
    assert.equal(await leased(), 0, 'the credit hold was returned');
  });
}

test('chat/completions: a slow client is not the upstream going idle: a reader that pauses longer than the deadline mid-stream gets the whole answer', async () => {
  w.openai.setFault(null); // a prompt upstream: it sends the whole answer at once
  try {
    const t = await w.user('slowreader');
    const words = Array.from({ length: 40_000 }, (_, i) => `w${i}`).join(' '); // the stub echoes them: ~5 MB of events
    const res = await fetch(`${w.gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...chat, messages: [{ role: 'user', content: words }] }),
    });
    assert.equal(res.status, 200);
    // the client stops reading for 3 × the idle deadline: the buffers fill, and citygate stops reading the upstream
    const text = await readWithPause(res, 3 * IDLE_MS);
    assert.doesNotMatch(text, /AI_STREAM_IDLE_TIMEOUT_MS|upstream_stream_idle/, 'no idle error');
    assert.match(text, /data: \[DONE\]\s*$/, 'the stream ran to its end');
    assert.match(text, /"content":" w39999"/, 'the last word arrived');
    const [rec] = await w.records(t, 1);
    assert.deepEqual([rec.status, rec.error_code ?? null, Boolean(rec.estimated)], ['ok', null, false], JSON.stringify(rec));
  } finally {
    w.openai.setFault({ stallStream: true });
  }
});
