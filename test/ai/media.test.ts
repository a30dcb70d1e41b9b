// The catalog, image and video jobs, speech in and out — over HTTP against the stub.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { client, errorOf } from '../helpers/http.ts';
import { RICH_USERS, startAiWorld, tokenFor, type AiWorld } from './setup.ts';
import { MP4_BYTES, PNG_BYTES } from '../stubs/openai-media.ts';

let w: AiWorld;
// No OPENAI_API_KEY at start: the catalog test adds it with env/upsert.
before(async () => {
  w = await startAiWorld({ env: { ...RICH_USERS, AI_UPSTREAM_TIMEOUT_MS: '15000' }, stub: { slowMs: 1500 } });
});
after(() => w?.close());

const alice = () => client(w.gw.url, w.alice);
const openaiKey = () => w.admin.post('/v1/env/upsert', { key: 'OPENAI_API_KEY', value: 'sk-stub' });
const bob = () => client(w.gw.url, w.bob);

async function waitJob(c: ReturnType<typeof client>, path: string, jobId: string, ms = 8000) {
  const end = Date.now() + ms;
  for (;;) {
    const r = await c.post(path, { job_id: jobId });
    assert.equal(r.status, 200, r.text);
    if (r.body.status === 'succeeded' || r.body.status === 'failed' || Date.now() > end) return r.body;
    await new Promise((res) => setTimeout(res, 50));
  }
}

describe('catalog', () => {
  test('user vs admin view; env/upsert of a key makes its models appear without a restart', async () => {
    const u1 = await alice().get('/v1/ai/models');
    assert.equal(u1.status, 200);
    const ids1 = u1.body.items.map((m: any) => m.id);
    assert.ok(ids1.includes('stub-model'));
    assert.ok(!ids1.includes('openai/gpt-image-1'), 'no OpenAI key yet');
    for (const m of u1.body.items) {
      assert.deepEqual(Object.keys(m).sort(), ['description', 'id', 'meta', 'modalities', 'name', 'tags']);
    }

    const a = await w.admin.get('/v1/ai/models');
    assert.equal(a.status, 200);
    const img = a.body.items.find((m: any) => m.id === 'openai/gpt-image-1');
    assert.ok(img, 'the admin sees every registered model');
    assert.deepEqual(img.default_modes, ['image']);
    assert.deepEqual(img.env_requirements[0], { key: 'OPENAI_API_KEY', description: 'API key of the openai provider', required: true });
    assert.equal(img.available, false);
    assert.equal(img.price.per_image, 42000);
    assert.equal(a.body.items.find((m: any) => m.id === 'stub-model').price, null, 'free unless priced');
    assert.ok(a.body.items.some((m: any) => m.id === 'anthropic/claude-sonnet-4-5'));

    const up = await w.admin.post('/v1/env/upsert', { key: 'OPENAI_API_KEY', value: 'sk-stub' });
    assert.equal(up.status, 200);
    const ids2 = (await alice().get('/v1/ai/models')).body.items.map((m: any) => m.id);
    for (const id of ['openai/gpt-image-1', 'openai/tts-1', 'openai/whisper-1', 'openai/sora-2']) assert.ok(ids2.includes(id), id);
  });

  test('MODEL_PRICES and MODEL_MODES apply at once', async () => {
    await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'stub-model': { input_per_mtok: 1000, output_per_mtok: 2000 } }) });
    await w.admin.post('/v1/env/upsert', { key: 'MODEL_MODES', value: JSON.stringify({ aliased: ['text'] }) });
    const a = await w.admin.get('/v1/ai/models');
    assert.deepEqual(a.body.items.find((m: any) => m.id === 'stub-model').price, { input_per_mtok: 1000, output_per_mtok: 2000 });
    const aliased = a.body.items.find((m: any) => m.id === 'aliased');
    assert.deepEqual([aliased.modalities, aliased.default_modes], [['text'], ['text', 'stream', 'compat', 'responses', 'messages']]);
    const r = await alice().post('/v1/ai/chat/completions', { model: 'aliased', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(r.status, 400);
    assert.equal(errorOf(r).code, 'mode_not_supported');
    await w.admin.post('/v1/env/remove', { key: 'MODEL_MODES' });
    await w.admin.post('/v1/env/remove', { key: 'MODEL_PRICES' });
  });
});

describe('image jobs', () => {
  test('create → poll → succeeded with a fetchable URL; another city’s user gets 404', async () => {
    await openaiKey();
    const c = await alice().post('/v1/ai/image/create', { model: 'openai/gpt-image-1', prompt: 'a red fox', n: 2, size: '1024x1024' });
    assert.equal(c.status, 200, c.text);
    assert.match(c.body.job_id, /^img_/);
    assert.ok(['queued', 'running', 'succeeded'].includes(c.body.status));
    const done = await waitJob(alice(), '/v1/ai/image/result', c.body.job_id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    assert.equal(done.images.length, 2);
    for (const im of done.images) {
      assert.equal(im.media_type, 'image/png');
      const f = await fetch(im.url);
      assert.equal(f.status, 200);
      assert.equal(f.headers.get('content-type'), 'image/png');
      assert.deepEqual(new Uint8Array(await f.arrayBuffer()), new Uint8Array(PNG_BYTES));
    }
    const other = await bob().post('/v1/ai/image/result', { job_id: c.body.job_id });
    assert.equal(other.status, 404);
    assert.equal(errorOf(other).code, 'job_not_found');
    const guessed = await fetch(`${w.gw.url}/v1/ai/files/ai/${c.body.job_id}/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.png`);
    assert.equal(guessed.status, 404);
    const unknown = await alice().post('/v1/ai/image/result', { job_id: 'img_nope' });
    assert.equal(unknown.status, 404);
  });

  test('a gateway restarted mid-job finishes it', async () => {
    await openaiKey();
    const c = await alice().post('/v1/ai/image/create', { model: 'slow-image', prompt: 'a slow snail' });
    assert.equal(c.status, 200, c.text);
    // Wait until the runner has sent the request upstream, then restart mid-call.
    const end = Date.now() + 3000;
    while (!w.stub.requests.some((r) => r.path === '/v1/images/generations' && (r.body as any)?.model === 'stub-slow') && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const mid = await alice().post('/v1/ai/image/result', { job_id: c.body.job_id });
    assert.equal(mid.body.status, 'running');
    w.gw = await w.gw.restart();
    w.admin = client(w.gw.url, w.gw.adminKey);
    const done = await waitJob(client(w.gw.url, w.alice), '/v1/ai/image/result', c.body.job_id, 10_000);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const f = await fetch(done.images[0].url);
    assert.equal(f.status, 200);
  });

  test('bad input → 400', async () => {
    for (const body of [{ model: 'openai/gpt-image-1' }, { model: 'openai/gpt-image-1', prompt: 'x', n: 0 }, { model: 'openai/gpt-image-1', prompt: 'x', size: 'big' }]) {
      const r = await alice().post('/v1/ai/image/create', body);
      assert.equal(r.status, 400, JSON.stringify(body));
    }
  });
});

describe('video jobs', () => {
  test('start → poll → succeeded with an MP4; other users get 404; a failed generation reports failed', async () => {
    await openaiKey();
    const c = await alice().post('/v1/ai/video', { model: 'stub-video', prompt: 'waves', seconds: 4 });
    assert.equal(c.status, 200, c.text);
    assert.match(c.body.job_id, /^vid_/);
    const done = await waitJob(alice(), '/v1/ai/video', c.body.job_id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const f = await fetch(done.videos[0].url);
    assert.equal(f.headers.get('content-type'), 'video/mp4');
    assert.deepEqual(new Uint8Array(await f.arrayBuffer()), new Uint8Array(MP4_BYTES));
    assert.equal((await bob().post('/v1/ai/video', { job_id: c.body.job_id })).status, 404);
    assert.equal((await alice().post('/v1/ai/video', {})).status, 400);
    const f2 = await alice().post('/v1/ai/video', { model: 'failing-video', prompt: 'doomed' });
    const failed = await waitJob(alice(), '/v1/ai/video', f2.body.job_id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error.code, 'generation_failed');
  });
});

describe('speech', () => {
  test('tts returns playable bytes of the requested format', async () => {
    await openaiKey();
    const res = await fetch(`${w.gw.url}/v1/ai/tts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/tts-1', text: 'hello world', voice: 'alloy', format: 'wav' }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'audio/wav');
    const b = new Uint8Array(await res.arrayBuffer());
    assert.equal(new TextDecoder().decode(b.subarray(0, 4)), 'RIFF');
    assert.equal(new TextDecoder().decode(b.subarray(8, 12)), 'WAVE');
    const mp3 = await fetch(`${w.gw.url}/v1/ai/tts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/tts-1', text: 'hello' }),
    });
    assert.equal(mp3.headers.get('content-type'), 'audio/mpeg');
    const m = new Uint8Array(await mp3.arrayBuffer());
    assert.ok(m[0] === 0xff && (m[1] & 0xe0) === 0xe0, 'an MPEG audio frame');
    const bad = await alice().post('/v1/ai/tts', { model: 'openai/tts-1', text: 'x', format: 'midi' });
    assert.equal(bad.status, 400);
  });

  test('asr: JSON with base64 audio and multipart both return the stub’s text', async () => {
    await openaiKey();
    const audio = new Uint8Array(32_000).fill(7);
    const b64 = Buffer.from(audio).toString('base64');
    const j = await alice().post('/v1/ai/asr', { model: 'openai/whisper-1', audio: b64 });
    assert.equal(j.status, 200, j.text);
    assert.equal(j.body.text, 'stub transcript of 32000 bytes');
    const form = new FormData();
    form.set('model', 'openai/whisper-1');
    form.set('file', new Blob([audio], { type: 'audio/wav' }), 'speech.wav');
    const res = await fetch(`${w.gw.url}/v1/ai/asr`, { method: 'POST', headers: { authorization: `Bearer ${w.alice}` }, body: form });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as any).text, 'stub transcript of 32000 bytes');
    const bad = await alice().post('/v1/ai/asr', { model: 'openai/whisper-1', audio: '***' });
    assert.equal(bad.status, 400);
    const mismatch = await alice().post('/v1/ai/asr', { model: 'openai/whisper-1', audio: b64, city_id: 'city-b' });
    assert.equal(mismatch.status, 403);
  });
});

describe('another city', () => {
  test('a new city’s user sees the same callable catalog', async () => {
    const t = await tokenFor(w.admin, 'city-c', 'carol');
    const r = await client(w.gw.url, t).get('/v1/ai/models');
    assert.equal(r.status, 200);
    assert.ok(r.body.items.length > 0);
  });
});
