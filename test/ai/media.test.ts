// The catalog, image and video jobs, speech in and out — over HTTP against the stub.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { client, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { chargedOnce, RICH_USERS, startAiWorld, tokenFor, userWithCredits, type AiWorld } from './setup.ts';
import { MP4_BYTES, PNG_BYTES } from '../stubs/openai-media.ts';

let w: AiWorld;
// No OPENAI_API_KEY at start: the catalog test adds it with env/upsert.
before(async () => {
  // slow-image's upstream answers after 8 s: longer than a graceful stop waits for calls in
  // flight (5 s, to write their charges), so the restart test really restarts mid-call.
  w = await startAiWorld({ env: { ...RICH_USERS, AI_UPSTREAM_TIMEOUT_MS: '15000' }, stub: { slowMs: 8000 } });
});
after(() => w?.close());

const alice = () => client(w.gw.url, w.alice);
const openaiKey = () => w.admin.post('/v1/env/upsert', { key: 'OPENAI_API_KEY', value: 'sk-stub' });
const bob = () => client(w.gw.url, w.bob);

/** Polls a job until it ends; fails loudly (with its last state) if it does not within `ms`. */
async function waitJob(c: ReturnType<typeof client>, path: string, jobId: string, ms = 60_000) {
  const end = Date.now() + ms;
  for (;;) {
    const r = await c.post(path, { job_id: jobId });
    assert.equal(r.status, 200, r.text);
    if (r.body.status === 'succeeded' || r.body.status === 'failed') return r.body;
    if (Date.now() > end) assert.fail(`job ${jobId} did not finish within ${ms} ms: ${JSON.stringify(r.body)}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** A user of city `money` whose balance is exactly `credits` (every new user starts rich here). */
const userWith = (userId: string, credits: number) => userWithCredits(w, 'money', userId, credits);
/**
 * A job outlives the request that reserved its credits (and may outlive the process): its
 * charge may be written as a lease 'charge' row or as a per-call hold and its settle.
 */
const JOB_ROWS = ['charge', 'hold', 'settle', 'release'];
const upstreamCalls = (path: string) => w.stub.requests.filter((r) => r.path === path).length;

describe('catalog', () => {
  test('user vs admin view; env/upsert of a key makes its models appear without a restart', async () => {
    const u1 = await alice().get('/v1/ai/models');
    assert.equal(u1.status, 200);
    const ids1 = u1.body.items.map((m: any) => m.id);
    assert.ok(ids1.includes('stub-model'));
    assert.ok(!ids1.includes('openai/gpt-image-1'), 'no OpenAI key yet');
    for (const m of u1.body.items) {
      // the seed's fields, and the price the user's city pays and the aliases (issue 26): no admin fields
      assert.deepEqual(Object.keys(m).sort(), ['aliases', 'description', 'id', 'meta', 'modalities', 'name', 'price', 'tags']);
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

  test('a gateway restarted mid-job finishes it, charged once', async () => {
    await openaiKey();
    await w.admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify({ 'slow-image': { per_image: 5000 } }) });
    const p = await userWith('snail', 12_000);
    const calls0 = w.stub.requests.filter((r) => r.path === '/v1/images/generations' && (r.body as any)?.model === 'stub-slow').length;
    const c = await p.u.post('/v1/ai/image/create', { model: 'slow-image', prompt: 'a slow snail' });
    assert.equal(c.status, 200, c.text);
    // Wait until the runner has sent the request upstream, then restart mid-call.
    const slowCalls = () => w.stub.requests.filter((r) => r.path === '/v1/images/generations' && (r.body as any)?.model === 'stub-slow').length - calls0;
    await until('the upstream call', () => slowCalls() === 1, 30_000);
    const mid = await p.u.post('/v1/ai/image/result', { job_id: c.body.job_id });
    assert.equal(mid.body.status, 'running');
    // One image is held while the job runs: two more (10,000) are refused, 7,000 left.
    const more = await p.u.post('/v1/ai/image/create', { model: 'slow-image', prompt: 'two more', n: 2 });
    assert.equal(more.status, 402, more.text);
    assert.match(errorOf(more).message, /up to 10000 credits .*\(available: 7000 credits\)/);
    assert.equal(slowCalls(), 1, 'the refused job did not call the upstream');
    w.gw = await w.gw.restart();
    w.admin = client(w.gw.url, w.gw.adminKey);
    const u2 = client(w.gw.url, p.token);
    const done = await waitJob(u2, '/v1/ai/image/result', c.body.job_id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    assert.equal(done.images.length, 1);
    const f = await fetch(done.images[0].url);
    assert.equal(f.status, 200);
    // the graceful stop cancelled the first upstream call; the restarted runner made one more
    assert.equal(slowCalls(), 2);
    // charged one image, once: the job's record, and the refused job's (nothing)
    const { records } = await chargedOnce(w.gw.url, p.token, 12_000, 5000, { records: 2, kinds: JOB_ROWS });
    assert.deepEqual(records.map((r: any) => [r.mode, r.status, r.images, r.credits]).sort(), [['image', 'error', 0, 0], ['image', 'ok', 1, 5000]]);
    await w.admin.post('/v1/env/remove', { key: 'MODEL_PRICES' });
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
    const mine = await client(w.gw.url, w.alice).get('/v1/ai/models');
    assert.ok(mine.body.items.length > 5, 'a real catalog');
    assert.deepEqual(r.body.items, mine.body.items);
  });
});

describe('media money', () => {
  // Stock prices: gpt-image-1 42,000 per image; tts-1 15 per character; whisper-1 100 per
  // second; stub-video (citygate.config.ts) 100,000 per second.
  // Each hold's size shows at the 402 boundary: a balance of exactly the worst case is served,
  // one credit less is refused before the upstream.
  test('image: the exact charge per image; short of credits → 402 before the upstream', async () => {
    await openaiKey();
    const p = await userWith('painter', 100_000);
    const c = await p.u.post('/v1/ai/image/create', { model: 'openai/gpt-image-1', prompt: 'a red fox', n: 2 });
    assert.equal(c.status, 200, c.text);
    assert.equal((await waitJob(p.u, '/v1/ai/image/result', c.body.job_id)).status, 'succeeded');
    const [rec] = (await chargedOnce(w.gw.url, p.token, 100_000, 84_000, { records: 1, kinds: JOB_ROWS })).records;
    assert.deepEqual([rec.mode, rec.status, rec.images, rec.credits], ['image', 'ok', 2, 84_000]);

    const exact = await userWith('exact-painter', 84_000);
    const c2 = await exact.u.post('/v1/ai/image/create', { model: 'openai/gpt-image-1', prompt: 'a red fox', n: 2 });
    assert.equal(c2.status, 200, c2.text);
    assert.equal((await waitJob(exact.u, '/v1/ai/image/result', c2.body.job_id)).status, 'succeeded');
    await chargedOnce(w.gw.url, exact.token, 84_000, 84_000, { records: 1, kinds: JOB_ROWS });

    const poor = await userWith('poor-painter', 83_999);
    const before = upstreamCalls('/v1/images/generations');
    const r = await poor.u.post('/v1/ai/image/create', { model: 'openai/gpt-image-1', prompt: 'a red fox', n: 2 });
    assert.equal(r.status, 402);
    assert.equal(errorOf(r).code, 'insufficient_credits');
    assert.match(errorOf(r).message, /up to 84000 credits/);
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(upstreamCalls('/v1/images/generations'), before, 'the upstream was not called');
    assert.equal(await poor.balance(), 83_999);
  });

  test('video: the exact charge per second; short of credits → 402 before the upstream', async () => {
    await openaiKey();
    const p = await userWith('director', 500_000);
    const c = await p.u.post('/v1/ai/video', { model: 'stub-video', prompt: 'waves', seconds: 4 });
    assert.equal(c.status, 200, c.text);
    assert.equal((await waitJob(p.u, '/v1/ai/video', c.body.job_id)).status, 'succeeded');
    const [rec] = (await chargedOnce(w.gw.url, p.token, 500_000, 400_000, { records: 1, kinds: JOB_ROWS })).records;
    assert.deepEqual([rec.mode, rec.status, rec.seconds, rec.credits], ['video', 'ok', 4, 400_000]);

    // no seconds given: held for the default 4 s, and the upstream is asked for exactly those
    const d = await userWith('default-director', 400_000);
    const c2 = await d.u.post('/v1/ai/video', { model: 'stub-video', prompt: 'default length' });
    assert.equal(c2.status, 200, c2.text);
    assert.equal((await waitJob(d.u, '/v1/ai/video', c2.body.job_id)).status, 'succeeded');
    const sent = w.stub.requests.filter((r) => r.path === '/v1/videos' && (r.body as any)?.prompt === 'default length');
    assert.deepEqual(sent.map((r) => (r.body as any).seconds), ['4']);
    await chargedOnce(w.gw.url, d.token, 400_000, 400_000, { records: 1, kinds: JOB_ROWS });

    const poor = await userWith('poor-director', 399_999);
    const before = upstreamCalls('/v1/videos');
    const r = await poor.u.post('/v1/ai/video', { model: 'stub-video', prompt: 'waves', seconds: 4 });
    assert.equal(r.status, 402);
    assert.equal(errorOf(r).code, 'insufficient_credits');
    assert.match(errorOf(r).message, /up to 400000 credits/);
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(upstreamCalls('/v1/videos'), before, 'the upstream was not called');
    assert.equal(await poor.balance(), 399_999);
  });

  test('tts: the exact charge per character; short of credits → 402 before the upstream', async () => {
    await openaiKey();
    const p = await userWith('speaker', 1000);
    const r = await p.u.post('/v1/ai/tts', { model: 'openai/tts-1', text: 'hello world' }); // 11 characters
    assert.equal(r.status, 200);
    const [rec] = (await chargedOnce(w.gw.url, p.token, 1000, 11 * 15, { records: 1 })).records;
    assert.deepEqual([rec.mode, rec.status, rec.input_tokens, rec.credits], ['tts', 'ok', 11, 165]);

    const exact = await userWith('exact-speaker', 165);
    assert.equal((await exact.u.post('/v1/ai/tts', { model: 'openai/tts-1', text: 'hello world' })).status, 200);
    await chargedOnce(w.gw.url, exact.token, 165, 165, { records: 1 });

    const poor = await userWith('poor-speaker', 164);
    const before = upstreamCalls('/v1/audio/speech');
    const no = await poor.u.post('/v1/ai/tts', { model: 'openai/tts-1', text: 'hello world' });
    assert.equal(no.status, 402);
    assert.match(errorOf(no).message, /up to 165 credits/);
    assert.equal(upstreamCalls('/v1/audio/speech'), before, 'the upstream was not called');
    assert.equal(await poor.balance(), 164);
  });

  test('asr: held for the worst case (1 s per 1,000 bytes), charged the measured seconds; short → 402 before the upstream', async () => {
    await openaiKey();
    const audio = Buffer.from(new Uint8Array(64_000).fill(7)).toString('base64'); // 2 s at the stub's 32,000 bytes/s
    const p = await userWith('listener', 64 * 100); // the hold is 64 s × 100: exactly enough
    const r = await p.u.post('/v1/ai/asr', { model: 'openai/whisper-1', audio });
    assert.equal(r.status, 200, r.text);
    const [rec] = (await chargedOnce(w.gw.url, p.token, 6400, 200, { records: 1 })).records;
    assert.deepEqual([rec.mode, rec.status, rec.seconds, rec.credits], ['asr', 'ok', 2, 200]);

    const poor = await userWith('poor-listener', 64 * 100 - 1); // the hold is 64 s × 100
    const before = upstreamCalls('/v1/audio/transcriptions');
    const no = await poor.u.post('/v1/ai/asr', { model: 'openai/whisper-1', audio });
    assert.equal(no.status, 402);
    assert.match(errorOf(no).message, /up to 6400 credits/);
    assert.equal(upstreamCalls('/v1/audio/transcriptions'), before, 'the upstream was not called');
    assert.equal(await poor.balance(), 6399);
  });
  test('asr without a duration from the upstream: charged the documented estimate (1 s per 16,000 bytes), marked estimated', async () => {
    await openaiKey();
    const audio = Buffer.from(new Uint8Array(64_000).fill(7)).toString('base64');
    const p = await userWith('estimated-listener', 10_000);
    const calls = upstreamCalls('/v1/audio/transcriptions');
    const r = await p.u.post('/v1/ai/asr', { model: 'asr-no-duration', audio });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.text, 'stub transcript of 64000 bytes');
    assert.equal(r.body.duration_seconds, undefined, 'the upstream reported no duration');
    assert.equal(upstreamCalls('/v1/audio/transcriptions'), calls + 1);
    // 64,000 bytes / 16,000 = 4 s at 100 credits a second (the hold was 64 s)
    const [rec] = (await chargedOnce(w.gw.url, p.token, 10_000, 400, { records: 1 })).records;
    assert.deepEqual([rec.mode, rec.status, rec.estimated, rec.seconds, rec.credits], ['asr', 'ok', true, 4, 400]);
  });
});
