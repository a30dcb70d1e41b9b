// The ai service and the money services together: a priced call is charged its measured cost,
// once, and leaves one usage record; a user short of the call's worst case gets 402 and no
// upstream call; failed calls are recorded and not charged. Charges are written back in batches
// (credit leases: one 'charge' ledger row per user per BALANCE_FLUSH_MS), so the tests wait for
// them with chargedOnce (setup.ts) instead of reading the balance right after the answer.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { client, errorOf } from '../helpers/http.ts';
import { chargedOnce, RICH_USERS, startAiWorld, tokenFor, userWithCredits, type AiWorld } from './setup.ts';

let w: AiWorld;
before(async () => {
  // stub-stream-slow sends a chunk every second: an abort lands between two chunks, so what was
  // relayed before it is known exactly.
  w = await startAiWorld({
    env: { ...RICH_USERS, AI_UPSTREAM_TIMEOUT_MS: '30000', TEXTPROVIDER_MODELS: 'stub-model,stub-500,stub-400,stub-slow,stub-stream-slow,stub-no-usage,aliased=stub-model' },
    stub: { streamSlowMs: 1000 },
  });
  // 1 credit per input token, 2 per output token
  const r = await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 }, 'stub-500': { per_request: 7 } }) });
  assert.equal(r.status, 200);
});
after(() => w?.close());

const balance = async (token: string) => (await client(w.gw.url, token).get('/v1/balance/me')).body.credits as number;
async function records(token: string, n: number) {
  const end = Date.now() + 30_000;
  for (;;) {
    const r = await client(w.gw.url, token).get('/v1/usage/me');
    if (r.body.items?.length >= n) return r.body.items;
    if (Date.now() > end) throw new Error(`${n} usage records expected, ${r.body.items?.length} arrived`);
    await new Promise((res) => setTimeout(res, 30));
  }
}
const bytes = (s: string) => Buffer.byteLength(s);
/** The documented estimate of tokens of a text when the upstream reports none (docs/money.md). */
const est = (n: number) => Math.ceil(n / 4);

/** POSTs a stream, reads until `until(text so far)` holds, then aborts; returns the request body. */
async function abortAfter(token: string, path: string, body: object, until: (text: string) => boolean): Promise<string> {
  const raw = JSON.stringify(body);
  const ac = new AbortController();
  const res = await fetch(`${w.gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: raw,
    signal: ac.signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = '';
  while (!until(text)) {
    const n = await reader.read();
    assert.ok(!n.done, `the stream ended before the abort point: ${text}`);
    text += dec.decode(n.value, { stream: true });
  }
  ac.abort();
  return raw;
}

describe('charging AI calls', () => {
  test('plain and streaming chat are charged the measured cost, once each, with usage records', async () => {
    const t = await tokenFor(w.admin, 'money-1', 'payer');
    const b0 = await balance(t);
    const u = client(w.gw.url, t);
    const r = await u.post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'one two' }] });
    assert.equal(r.status, 200);
    const cost1 = r.body.usage.prompt_tokens * 1 + r.body.usage.completion_tokens * 2; // 5 + 2 × 5
    assert.equal(cost1, 15);
    await chargedOnce(w.gw.url, t, b0, cost1, { records: 1 });
    const s = await u.post('/v1/ai/chat/completions', { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'a b c' }] });
    assert.equal(s.status, 200);
    // a stream is charged once it ended: 6 in, 6 out
    const { records: recs } = await chargedOnce(w.gw.url, t, b0, cost1 + 6 + 2 * 6, { records: 2 });
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
    assert.equal(await balance(t), 0);
  });

  test('an upstream failure is not charged, and recorded as an error', async () => {
    const t = await tokenFor(w.admin, 'money-3', 'unlucky');
    const b0 = await balance(t);
    const r = await client(w.gw.url, t).post('/v1/ai/text', { model: 'stub-500', prompt: 'x' });
    assert.equal(r.status, 502);
    // A charge lands in a later flush, not with the answer: one successful call after the failed
    // one is charged in the same flush or a later one, so once its charge is in, a charge of the
    // failed call would be too.
    const ok = await client(w.gw.url, t).post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'one two' }] });
    assert.equal(ok.status, 200, ok.text);
    const { records: recs } = await chargedOnce(w.gw.url, t, b0, 15, { records: 2 });
    assert.deepEqual(recs.map((x: any) => [x.model, x.status, x.credits]).sort(), [['stub-500', 'error', 0], ['stub-model', 'ok', 15]]);
  });

  test('a client abort mid-stream is charged the documented estimate and recorded as aborted', async () => {
    await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-stream-slow': { input_per_mtok: 1_000_000, output_per_mtok: 1_000_000 } }) });
    const t = await tokenFor(w.admin, 'money-4', 'quitter');
    const b0 = await balance(t);
    // The upstream sends the role chunk, then "w1", " w2", … one a second; abort after w3.
    const raw = await abortAfter(t, '/v1/ai/chat/completions', { model: 'stub-stream-slow', stream: true, max_tokens: 1000, messages: [{ role: 'user', content: 'go' }] }, (x) => x.includes('"w3"') || x.includes('" w3"'));
    const recs = await records(t, 1);
    assert.equal(recs[0].status, 'aborted');
    assert.equal(recs[0].estimated, true, 'no usage was reported before the abort');
    // input: request bytes / 4; output: one token per relayed JSON event after the role event
    assert.deepEqual([recs[0].input_tokens, recs[0].output_tokens], [est(bytes(raw)), 3]);
    const want = est(bytes(raw)) + 3;
    assert.equal(recs[0].credits, want);
    await chargedOnce(w.gw.url, t, b0, want, { records: 1 });
  });

  test('an aborted AI SDK stream (/v1/ai/stream) is charged the documented estimate, not nothing', async () => {
    await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-stream-slow': { input_per_mtok: 1_000_000, output_per_mtok: 1_000_000 } }) });
    const t = await tokenFor(w.admin, 'money-5', 'leaver');
    const b0 = await balance(t);
    const raw = await abortAfter(t, '/v1/ai/stream', { model: 'stub-stream-slow', prompt: 'go', max_tokens: 1000 }, (x) => x.includes('" w3"'));
    const recs = await records(t, 1);
    assert.equal(recs[0].status, 'aborted');
    assert.equal(recs[0].estimated, true);
    // output: the text relayed ("w1 w2 w3", 8 bytes) / 4
    assert.deepEqual([recs[0].input_tokens, recs[0].output_tokens], [est(bytes(raw)), est(bytes('w1 w2 w3'))]);
    const want = est(bytes(raw)) + est(bytes('w1 w2 w3'));
    assert.equal(recs[0].credits, want);
    await chargedOnce(w.gw.url, t, b0, want, { records: 1 });
  });
});

describe('an upstream that reports no usage', () => {
  // prompt "one two" → reply "Hello from stub: one two" (no usage reported by stub-no-usage)
  const REPLY = 'Hello from stub: one two';
  before(async () => {
    const price = { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 };
    const r = await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-no-usage': price, 'translated-no-usage': price }) });
    assert.equal(r.status, 200);
  });

  test('pass-through chat without usage is charged the estimate: request bytes / 4 in, reply bytes / 4 out', async () => {
    const t = await tokenFor(w.admin, 'money-6', 'estimated');
    const b0 = await balance(t);
    const body = { model: 'stub-no-usage', messages: [{ role: 'user', content: 'one two' }] };
    const r = await client(w.gw.url, t).post('/v1/ai/chat/completions', body);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.choices[0].message.content, REPLY);
    assert.equal(r.body.usage, undefined, 'the upstream reported none');
    const want = est(bytes(JSON.stringify(body))) + 2 * est(bytes(REPLY));
    const [rec] = (await chargedOnce(w.gw.url, t, b0, want, { records: 1 })).records;
    assert.deepEqual([rec.status, rec.estimated, rec.input_tokens, rec.output_tokens, rec.credits], ['ok', true, est(bytes(JSON.stringify(body))), est(bytes(REPLY)), want]);
  });

  test('a pass-through stream that ends without usage is charged the estimate', async () => {
    const t = await tokenFor(w.admin, 'money-7', 'estimated');
    const b0 = await balance(t);
    const body = { model: 'stub-no-usage', stream: true, messages: [{ role: 'user', content: 'one two' }] };
    const r = await client(w.gw.url, t).post('/v1/ai/chat/completions', body);
    assert.equal(r.status, 200);
    // events: role, "Hello", " from", " stub:", " one", " two", finish, [DONE] → 6 JSON events after the role event
    const want = est(bytes(JSON.stringify(body))) + 2 * 6;
    const [rec] = (await chargedOnce(w.gw.url, t, b0, want, { records: 1 })).records;
    assert.deepEqual([rec.status, rec.estimated, rec.output_tokens, rec.credits], ['ok', true, 6, want]);
  });

  test('/v1/ai/text (AI SDK) without usage is charged the estimate', async () => {
    const t = await tokenFor(w.admin, 'money-8', 'estimated');
    const b0 = await balance(t);
    const body = { model: 'stub-no-usage', prompt: 'one two' };
    const r = await client(w.gw.url, t).post('/v1/ai/text', body);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.parts[0].text, REPLY);
    const want = est(bytes(JSON.stringify(body))) + 2 * est(bytes(REPLY));
    const [rec] = (await chargedOnce(w.gw.url, t, b0, want, { records: 1 })).records;
    assert.deepEqual([rec.status, rec.estimated, rec.credits], ['ok', true, want]);
  });

  /** One record, estimated: request bytes / 4 in, the reply's bytes / 4 out; the balance dropped by exactly that (output costs twice input). */
  async function chargedTheEstimate(t: string, b0: number, body: object) {
    const input = est(bytes(JSON.stringify(body)));
    const output = est(bytes(REPLY));
    const want = input + 2 * output;
    const [rec] = (await chargedOnce(w.gw.url, t, b0, want, { records: 1 })).records;
    assert.deepEqual([rec.status, rec.estimated, rec.input_tokens, rec.output_tokens, rec.credits], ['ok', true, input, output, want]);
  }

  // translated-no-usage: an upstream served through the AI SDK translation (chat/translate.ts),
  // not relayed as is, whose answers carry no usage.
  const translatedCalls = () => w.stub.requests.filter((r) => r.path === '/v1/chat/completions' && (r.body as any)?.model === 'stub-no-usage').length;

  test('translated chat (AI SDK) without usage is charged the estimate: request bytes / 4 in, reply bytes / 4 out', async () => {
    const t = await tokenFor(w.admin, 'money-10', 'estimated');
    const b0 = await balance(t);
    const calls = translatedCalls();
    const body = { model: 'translated-no-usage', messages: [{ role: 'user', content: 'one two' }] };
    const r = await client(w.gw.url, t).post('/v1/ai/chat/completions', body);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.object, 'chat.completion');
    assert.equal(r.body.choices[0].message.content, REPLY);
    assert.equal(translatedCalls(), calls + 1, 'answered by the upstream through the translation');
    assert.equal(r.body.usage, undefined, 'the upstream reported none: no usage shown (not zeros)');
    await chargedTheEstimate(t, b0, body);
  });

  test('a translated stream (AI SDK) that ends without usage is charged the estimate of the text relayed', async () => {
    const t = await tokenFor(w.admin, 'money-11', 'estimated');
    const b0 = await balance(t);
    const body = { model: 'translated-no-usage', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'one two' }] };
    const r = await client(w.gw.url, t).post('/v1/ai/chat/completions', body);
    assert.equal(r.status, 200);
    const relayed = r.text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? '')
      .join('');
    assert.equal(relayed, REPLY, 'the whole reply was relayed');
    assert.doesNotMatch(r.text, /"usage"/, 'the upstream reported none: no usage event (not zeros)');
    assert.match(r.text, /data: \[DONE\]/);
    await chargedTheEstimate(t, b0, body);
  });

  test('a call whose upstream reports usage is not marked estimated', async () => {
    const t = await tokenFor(w.admin, 'money-9', 'measured');
    const r = await client(w.gw.url, t).post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(r.status, 200);
    const [rec] = await records(t, 1);
    assert.equal(rec.estimated, false);
  });
});

describe('hold sizing: the hold covers the measured cost, or the call is refused up front', () => {
  // Output only, 1 credit per token: the hold is exactly the output-token worst case. Its size is
  // seen at the 402 boundary: one credit below it is refused before the upstream, exactly it is
  // served (and charged the measured cost).
  before(async () => {
    const r = await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-model': { output_per_mtok: 1_000_000 } }) });
    assert.equal(r.status, 200);
  });
  /** A user whose balance is exactly `credits`. */
  const userWith = async (userId: string, credits: number) => (await userWithCredits(w, 'holds', userId, credits)).token;
  const chats = () => w.stub.requests.filter((r) => r.path === '/v1/chat/completions').length;
  // The stub's reply: "Hello from stub: <the 8 words>" = 11 words, cut to the token limit, × n.
  const EIGHT = 'one two three four five six seven eight';

  test('n: held for every choice — 3 × 10 tokens', async () => {
    const body = { model: 'stub-model', n: 3, max_tokens: 10, messages: [{ role: 'user', content: EIGHT }] };
    const short = await userWith('n-short', 29);
    const before = chats();
    const r = await client(w.gw.url, short).post('/v1/ai/chat/completions', body);
    assert.equal(r.status, 402, r.text);
    assert.match(errorOf(r).message, /up to 30 credits/);
    assert.equal(chats(), before, 'the upstream was not called');
    const enough = await userWith('n-enough', 30);
    const ok = await client(w.gw.url, enough).post('/v1/ai/chat/completions', body);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.usage.completion_tokens, 30);
    await chargedOnce(w.gw.url, enough, 30, 30, { records: 1 }); // the full measured cost
    // written in the same flush as the charge above, or before it: the refusal cost nothing
    assert.equal(await balance(short), 29);
  });

  test('max_completion_tokens is the limit the hold uses, whatever max_tokens says', async () => {
    const body = { model: 'stub-model', max_tokens: 1, max_completion_tokens: 10, messages: [{ role: 'user', content: EIGHT }] };
    const short = await userWith('mct-short', 9);
    const before = chats();
    const r = await client(w.gw.url, short).post('/v1/ai/chat/completions', body);
    assert.equal(r.status, 402, r.text);
    assert.match(errorOf(r).message, /up to 10 credits/);
    assert.equal(chats(), before, 'the upstream was not called');
    const enough = await userWith('mct-enough', 10);
    const ok = await client(w.gw.url, enough).post('/v1/ai/chat/completions', body);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.usage.completion_tokens, 10);
    await chargedOnce(w.gw.url, enough, 10, 10, { records: 1 }); // the full measured cost
    assert.equal(await balance(short), 9);
  });

  test('no token limit: held for the documented default worst case (8,192 output tokens)', async () => {
    const body = { model: 'stub-model', messages: [{ role: 'user', content: EIGHT }] };
    const short = await userWith('default-short', 8191);
    const before = chats();
    const r = await client(w.gw.url, short).post('/v1/ai/chat/completions', body);
    assert.equal(r.status, 402, r.text);
    assert.match(errorOf(r).message, /up to 8192 credits/);
    const t = await client(w.gw.url, short).post('/v1/ai/text', { model: 'stub-model', prompt: EIGHT });
    assert.equal(t.status, 402, t.text);
    assert.match(errorOf(t).message, /up to 8192 credits/);
    assert.equal(chats(), before, 'the upstream was not called');
    const enough = await userWith('default-enough', 8192);
    const ok = await client(w.gw.url, enough).post('/v1/ai/chat/completions', body);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.usage.completion_tokens, 11);
    // charged the measured cost; the rest of the worst case stays the user's
    await chargedOnce(w.gw.url, enough, 8192, 11, { records: 1 });
    assert.equal(await balance(short), 8191);
  });
});
