// The AI SDK (`ai`, `@ai-sdk/*`) is loaded when a call first needs it, not at boot
// (src/services/ai/upstream/sdk.ts): a gateway that only relays chat/completions never loads it, and a
// translated call loads `ai` and the one provider package it uses. Seen from outside, in the
// `serve` process itself: Node's module hooks, preloaded, list every module it loads.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { tempDir } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { startAiWorld, type AiWorld } from './setup.ts';

const TRACE = resolve(import.meta.dirname, '../helpers/module-trace.ts');
const traceFile = join(tempDir('citygate-modules-'), 'loaded.txt');

/** The AI SDK's packages the gateway has loaded so far ('ai', '@ai-sdk/openai', …). */
function sdkLoaded(): string[] {
  const urls = existsSync(traceFile) ? readFileSync(traceFile, 'utf8').split('\n') : [];
  const pkgs = new Set<string>();
  for (const u of urls) {
    const m = /\/node_modules\/(ai|@ai-sdk\/[^/]+)\//.exec(u);
    if (m) pkgs.add(m[1]);
  }
  return [...pkgs].sort();
}

let w: AiWorld;
before(async () => {
  w = await startAiWorld({ env: { NODE_OPTIONS: `--import ${TRACE}`, MODULE_TRACE_FILE: traceFile } });
});
after(() => w?.close());

test('boot and the chat/completions pass-through load no AI SDK; a translated call loads ai and its provider only', async () => {
  assert.ok(readFileSync(traceFile, 'utf8').includes('/src/services/ai/'), 'the trace sees the gateway load its own modules');
  assert.deepEqual(sdkLoaded(), [], 'after boot');

  const u = client(w.gw.url, w.alice);
  const relayed = await u.post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(relayed.status, 200, relayed.text);
  const streamed = await u.post('/v1/ai/chat/completions', { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(streamed.status, 200, streamed.text);
  assert.deepEqual(sdkLoaded(), [], 'after relayed chat/completions calls');

  const text = await u.post('/v1/ai/text', { model: 'stub-model', prompt: 'hi you' });
  assert.equal(text.status, 200, text.text);
  const loaded = sdkLoaded();
  assert.ok(loaded.includes('ai') && loaded.includes('@ai-sdk/openai-compatible'), `after a translated call: ${loaded}`);
  for (const p of ['@ai-sdk/anthropic', '@ai-sdk/google', '@ai-sdk/openai']) assert.ok(!loaded.includes(p), `${p} is not loaded: no call used it (${loaded})`);
});
