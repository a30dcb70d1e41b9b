// An upstream that quotes secrets in its error text never hands them to the caller: the key
// citygate sent it (held in the env, not key-shaped, so only the exact match can catch it),
// another upstream's key, the admin key, the master key, a webhook secret, the caller's own
// token, and anything key-shaped (`sk-…`, `Bearer …`). In JSON answers and in streams, on the
// pass-through and on translated calls.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { call } from '../helpers/http.ts';
import { startAiWorld, type AiWorld } from './setup.ts';

const UPSTREAM_KEY = 'upstream-key-9f8e7d6c5b4a3210';
const WEBHOOK_SECRET = 'plain-webhook-secret-55aa66bb';
const OTHER_KEY = 'another-upstream-key-0011223344';
let w: AiWorld;
let secrets: string[];

before(async () => {
  w = await startAiWorld({ stub: { apiKey: UPSTREAM_KEY }, env: { TEXTPROVIDER_API_KEY: UPSTREAM_KEY, PAYMENT_A_WEBHOOK_SECRET: WEBHOOK_SECRET } });
  const up = await w.admin.post('/v1/ai/upstreams/create', { name: 'other', kind: 'openai-compatible', base_url: 'http://127.0.0.1:9/v1', api_key: OTHER_KEY, models: ['nobody-model'] });
  assert.equal(up.status, 200, up.text);
  const masterFile = `${w.gw.dbPath}.master-key`;
  const master = existsSync(masterFile) ? readFileSync(masterFile, 'utf8').trim() : null;
  secrets = [UPSTREAM_KEY, OTHER_KEY, WEBHOOK_SECRET, w.gw.adminKey, w.alice, 'sk-proj-EchoedKey0123456789abcdef', ...(master ? [master] : [])];
  const quoted = `Incorrect API key provided: Bearer ${UPSTREAM_KEY}. Also seen: sk-proj-EchoedKey0123456789abcdef, ${OTHER_KEY}, ${WEBHOOK_SECRET}, ${w.gw.adminKey}, ${w.alice}${master ? `, ${master}` : ''}`;
  w.stub.setFault({ status: 400, message: quoted });
});
after(() => w?.close());

const CALLS: [string, string, unknown][] = [
  ['chat/completions (pass-through), JSON', '/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] }],
  ['chat/completions (pass-through), stream', '/v1/ai/chat/completions', { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }],
  ['chat/completions (translated), stream', '/v1/ai/chat/completions', { model: 'translated', stream: true, messages: [{ role: 'user', content: 'hi' }] }],
  ['text (AI SDK)', '/v1/ai/text', { model: 'stub-model', prompt: 'hi' }],
  ['stream (AI SDK)', '/v1/ai/stream', { model: 'stub-model', messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }] }],
  ['Responses (translated), stream', '/v1/ai/responses', { model: 'stub-model', stream: true, input: 'hi' }],
  ['Messages (translated)', '/v1/ai/messages', { model: 'stub-model', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }],
];

for (const [name, path, body] of CALLS) {
  test(`an upstream echoing secrets: ${name} relays its reason without them`, async () => {
    const r = await call(w.gw.url, 'POST', path, { token: w.alice, body });
    assert.ok(r.status >= 400 || /error/.test(r.text), `${r.status} ${r.text}`);
    assert.match(r.text, /Incorrect API key provided/, 'the upstream reason is still relayed');
    for (const s of secrets) assert.ok(!r.text.includes(s), `${s.slice(0, 12)}… leaked: ${r.text}`);
    assert.match(r.text, /\[redacted\]/);
  });
}
