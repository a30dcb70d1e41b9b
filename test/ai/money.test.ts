// The ai service and the money services together: a priced call holds, settles to the measured
// cost, and leaves one usage record; a user short of credits gets 402 and no upstream call;
// failed calls are recorded and not charged.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { client, errorOf } from '../helpers/http.ts';
import { RICH_USERS, startAiWorld, tokenFor, type AiWorld } from './setup.ts';

let w: AiWorld;
before(async () => {
  w = await startAiWorld({ env: RICH_USERS });
  // 1 credit per input token, 2 per output token
  const r = await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 }, 'stub-500': { per_request: 7 } }) });
  assert.equal(r.status, 200);
});
after(() => w?.close());

const balance = async (token: string) => (await client(w.gw.url, token).get('/v1/balance/me')).body.credits as number;
async function records(token: string, n: number) {
  const end = Date.now() + 3000;
  for (;;) {
    const r = await client(w.gw.url, token).get('/v1/usage/me');
    if (r.body.items?.length >= n || Date.now() > end) return r.body.items;
    await new Promise((res) => setTimeout(res, 30));
  }
}

describe('charging AI calls', () => {
  test('plain and streaming chat are charged the measured cost, once each, with usage records', async () => {
    const t = await tokenFor(w.admin, 'money-1', 'payer');
    const b0 = await balance(t);
    const u = client(w.gw.url, t);
    const r = await u.post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'one two' }] });
    assert.equal(r.status, 200);
    const cost1 = r.body.usage.prompt_tokens * 1 + r.body.usage.completion_tokens * 2; // 5 + 2 × 5
    // settled right after the response (at once on SQLite, a round trip later on PostgreSQL)
    for (const end = Date.now() + 2000; b0 - (await balance(t)) !== cost1 && Date.now() < end; ) await new Promise((res) => setTimeout(res, 20));
    assert.equal(b0 - (await balance(t)), cost1);
    const s = await u.post('/v1/ai/chat/completions', { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'a b c' }] });
    assert.equal(s.status, 200);
    // a stream is settled right after its end
    const want = b0 - (cost1 + 6 + 2 * 6);
    for (const end = Date.now() + 2000; (await balance(t)) !== want && Date.now() < end; ) await new Promise((res) => setTimeout(res, 20));
    assert.equal(await balance(t), want);
    const recs = await records(t, 2);
    assert.equal(recs.length, 2);
    assert.deepEqual(recs.map((x: any) => [x.mode, x.status, x.credits]).sort(), [['compat', 'ok', 15], ['compat', 'ok', 18]]);
  });

  test('short of credits → 402 and no upstream call', async () => {
    const t = await tokenFor(w.admin, 'money-2', 'broke');
    const have = await balance(t);
    const adj = await w.admin.post('/v1/balance/adjust', { city_id: 'money-2', user_id: 'broke', credits: -have, reason: 'test', idempotency_key: 'drain-broke' });
    assert.equal(adj.status, 200, adj.text);
    const before = w.stub.requests.length;
    const r = await client(w.gw.url, t).post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(r.status, 402);
    assert.equal(errorOf(r).code, 'insufficient_credits');
    assert.equal(w.stub.requests.length, before, 'the upstream was not called');
  });

  test('an upstream failure releases the hold: not charged, recorded as an error', async () => {
    const t = await tokenFor(w.admin, 'money-3', 'unlucky');
    const b0 = await balance(t);
    const r = await client(w.gw.url, t).post('/v1/ai/text', { model: 'stub-500', prompt: 'x' });
    assert.equal(r.status, 502);
    assert.equal(await balance(t), b0);
    const recs = await records(t, 1);
    assert.equal(recs[0].status, 'error');
    assert.equal(recs[0].credits, 0);
  });

  test('a client abort mid-stream is charged what was consumed and recorded as aborted', async () => {
    await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-stream-slow': { output_per_mtok: 1_000_000 } }) });
    const t = await tokenFor(w.admin, 'money-4', 'quitter');
    const b0 = await balance(t);
    const ac = new AbortController();
    const res = await fetch(`${w.gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stub-stream-slow', stream: true, max_tokens: 1000, messages: [{ role: 'user', content: 'go' }] }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    ac.abort();
    const recs = await records(t, 1);
    assert.equal(recs[0].status, 'aborted');
    const spent = b0 - (await balance(t));
    assert.ok(spent >= 0 && spent < 1000, `charged ${spent}: what was relayed, not the 1000-token hold`);
    assert.equal(spent, recs[0].credits);
  });
});
