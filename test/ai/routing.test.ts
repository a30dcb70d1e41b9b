// Upstream routing (issue 13) against several stub upstreams that fail in chosen ways:
// fallbacks, weights, Retry-After, streams broken after their first byte, cooldowns and
// half-open probes, disabled/removed upstreams, write-only keys, admin-only actions, and
// /metrics counters that match the calls made.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client, errorOf, type Res } from '../helpers/http.ts';
import { sqlGet } from '../helpers/sql.ts';
import { unsettled } from '../money/setup.ts';
import { sleep, until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { RICH_USERS, tokenFor } from './setup.ts';

const KEYS = ['sk-route-alpha-SECRET-1111', 'sk-route-bravo-SECRET-2222', 'sk-route-charlie-SECRET-3333', 'sk-route-delta-SECRET-4444'];
const COOLDOWN_MS = 1500;
let stubs: OpenAIStub[];
let gw: TestGateway;
let admin: ReturnType<typeof client>;
let user: string;
/** Every response body the tests saw (none may carry an upstream key). */
const seen: string[] = [];
let okChats = 0;

before(async () => {
  stubs = await Promise.all(KEYS.map((apiKey) => startOpenAIStub({ apiKey })));
  gw = await startGateway({
    env: { ...RICH_USERS, AI_COOLDOWN_FAILURES: '2', AI_COOLDOWN_MS: String(COOLDOWN_MS), AI_RETRY_BACKOFF_MS: '10', METRICS_TOKEN: 'metrics-token-for-tests-0123456789' },
  });
  admin = client(gw.url, gw.adminKey);
  user = await tokenFor(admin, 'route-city', 'rita');
  // 1 credit per input token, 2 per output token, for every model these tests use
  const price = { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 };
  const models = ['trio', 'split', 'limited', 'limited2', 'broken', 'cool', 'toggle'];
  const r = await admin.post('/v1/env/upsert', { key: 'MODEL_PRICES', value: JSON.stringify(Object.fromEntries(models.map((m) => [m, price]))) });
  assert.equal(r.status, 200);
});
after(async () => {
  await gw?.stop();
  await Promise.all((stubs ?? []).map((s) => s.close()));
});

async function adminPost(path: string, body: unknown): Promise<Res> {
  const r = await admin.post(path, body);
  seen.push(r.text);
  return r;
}

async function addUpstream(stub: number, models: unknown[], extra: Record<string, unknown> = {}): Promise<string> {
  const r = await adminPost('/v1/ai/upstreams/create', { name: `stub-${stub}`, kind: 'openai-compatible', base_url: stubs[stub].url, api_key: KEYS[stub], models, ...extra });
  assert.equal(r.status, 200, r.text);
  return r.body.upstream_id;
}

async function chat(model: string, extra: Record<string, unknown> = {}): Promise<Res> {
  const r = await call(gw.url, 'POST', '/v1/ai/chat/completions', { token: user, body: { model, messages: [{ role: 'user', content: 'one two three' }], ...extra } });
  seen.push(r.text);
  if (r.status === 200) okChats++;
  return r;
}

async function usageOf(model: string, n: number): Promise<any[]> {
  return until(`${n} usage records of ${model}`, async () => {
    const items: any[] = [];
    let cursor: string | undefined;
    do {
      const r = await admin.get(`/v1/usage/list?model=${model}&limit=200${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(r.text);
      items.push(...r.body.items);
      cursor = r.body.next_cursor ?? undefined;
    } while (cursor);
    return items.length >= n ? items : null;
  });
}

const balance = async () => (await client(gw.url, user).get('/v1/balance/me')).body.credits as number;
/**
 * The balance once every charge of the user is written: the calls of the tests before are
 * charged within a flush interval of their answers (credit leases), and a starting balance read
 * before that would count their charges as this test's.
 */
async function settledBalance(): Promise<number> {
  await until('the earlier calls to settle', async () => (await unsettled(gw, 'rita')) === 0, 30_000);
  return balance();
}
const sent = (s: OpenAIStub) => s.requests.filter((q) => q.path === '/v1/chat/completions').length;
function reset() {
  for (const s of stubs) {
    s.setFault(null);
    s.reset();
  }
}

describe('upstreams as data', () => {
  test('bad input → 400 naming the field; nothing is created', async () => {
    const base = { name: 'x', kind: 'openai-compatible', base_url: 'http://127.0.0.1:1/v1', models: ['m'] };
    for (const [patch, param] of [
      [{ kind: 'bogus' }, 'kind'],
      [{ base_url: 'ftp://example.com/v1' }, 'base_url'],
      [{ base_url: 'not a url' }, 'base_url'],
      [{ models: [] }, 'models'],
      [{ weight: 0 }, 'weight'],
      [{ base_url: undefined }, 'base_url'],
    ] as const) {
      const r = await adminPost('/v1/ai/upstreams/create', { ...base, ...patch });
      assert.equal(r.status, 400, `${JSON.stringify(patch)}: ${r.text}`);
      assert.equal(errorOf(r).param, param, r.text);
    }
    const list = await admin.get('/v1/ai/upstreams/list');
    assert.equal(list.body.items.filter((u: any) => !u.builtin).length, 0);
    const up = await adminPost('/v1/ai/upstreams/update', { upstream_id: 'ups_nope', weight: 2 });
    assert.equal(up.status, 404);
    const env = await adminPost('/v1/ai/upstreams/update', { upstream_id: 'env:openai', weight: 2 });
    assert.equal(env.status, 400);
  });

  test('the env slots are listed as built-in upstreams; a created one shows has_key and the last 4 only', async () => {
    const id = await addUpstream(0, ['listed', { id: 'listed-alias', upstream_model: 'gpt-4o-mini' }], { weight: 2, priority: 1, timeout_ms: 5000 });
    const list = await admin.get('/v1/ai/upstreams/list');
    seen.push(list.text);
    assert.equal(list.status, 200);
    const ids = list.body.items.map((u: any) => u.upstream_id);
    for (const b of ['env:textprovider', 'env:openai', 'env:anthropic', 'env:google']) assert.ok(ids.includes(b), `${b} listed`);
    const openai = list.body.items.find((u: any) => u.upstream_id === 'env:openai');
    assert.equal(openai.builtin, true);
    assert.equal(openai.has_key, false);
    assert.equal(openai.enabled, false);
    const mine = list.body.items.find((u: any) => u.upstream_id === id);
    assert.deepEqual(
      { has_key: mine.has_key, key_last4: mine.key_last4, models: mine.models, weight: mine.weight, priority: mine.priority, timeout_ms: mine.timeout_ms, enabled: mine.enabled },
      { has_key: true, key_last4: '1111', models: ['listed', { id: 'listed-alias', upstream_model: 'gpt-4o-mini' }], weight: 2, priority: 1, timeout_ms: 5000, enabled: true },
    );
    assert.equal('api_key' in mine, false);
    // At rest the key is sealed under the master key (SQLite and PostgreSQL alike), never in clear.
    const stored = await sqlGet<{ api_key: string }>(gw, `SELECT api_key FROM ai_upstreams WHERE upstream_id = ?`, [id]);
    assert.match(stored!.api_key, /^enc:v1:/);
    assert.equal(stored!.api_key.includes(KEYS[0]), false);
    // the model is callable at once, and the alias is sent as its upstream id
    const r = await chat('listed-alias');
    assert.equal(r.status, 200, r.text);
    assert.equal(stubs[0].requests.at(-1)!.body && (stubs[0].requests.at(-1)!.body as any).model, 'gpt-4o-mini');
    const models = await client(gw.url, user).get('/v1/ai/models');
    assert.ok(models.body.items.some((m: any) => m.id === 'listed'));
    // removing the key leaves has_key false
    const u = await adminPost('/v1/ai/upstreams/update', { upstream_id: id, api_key: null });
    assert.equal(u.body.has_key, false);
    assert.equal((await adminPost('/v1/ai/upstreams/remove', { upstream_id: id })).status, 200);
    assert.equal((await chat('listed')).status, 404);
    reset();
  });

  test('a user token cannot call any ai/upstreams/* action (403)', async () => {
    const u = client(gw.url, user);
    for (const [m, path] of [['GET', 'list'], ['POST', 'create'], ['POST', 'update'], ['POST', 'remove']]) {
      const r = m === 'GET' ? await u.get(`/v1/ai/upstreams/${path}`) : await u.post(`/v1/ai/upstreams/${path}`, { name: 'x', kind: 'openai', models: ['m'], upstream_id: 'x' });
      assert.equal(r.status, 403, `${path}: ${r.text}`);
      assert.equal(errorOf(r).code, 'identity_not_allowed');
    }
  });
});

describe('routing', () => {
  test('three upstreams (500, hang, healthy): 100 calls all succeed, each charged once, usage names upstream and attempts', async () => {
    reset();
    stubs[0].setFault({ status: 500 });
    stubs[1].setFault({ hang: true });
    const [a, b, c] = [await addUpstream(0, ['trio']), await addUpstream(1, ['trio'], { timeout_ms: 300 }), await addUpstream(2, ['trio'])];
    const b0 = await settledBalance();
    const results: Res[] = [];
    for (let i = 0; i < 10; i++) results.push(...(await Promise.all(Array.from({ length: 10 }, () => chat('trio')))));
    assert.deepEqual(results.map((r) => r.status), Array(100).fill(200));
    const recs = await usageOf('trio', 100);
    assert.equal(recs.length, 100, 'one usage record per call');
    assert.ok(recs.every((r) => r.status === 'ok' && r.upstream === c && r.attempts >= 1 && r.attempts <= 3), JSON.stringify(recs.find((r) => r.upstream !== c)));
    assert.ok(recs.some((r) => r.attempts > 1), 'some calls were retried');
    // each call charged once: the balance fell by exactly the sum of the records' credits
    const cost = 5 + 2 * 3; // prompt_tokens 3 + 3 = 6? see below: computed from the answer
    const perCall = results[0].body.usage.prompt_tokens + 2 * results[0].body.usage.completion_tokens;
    assert.ok(perCall > 0 && cost > 0);
    assert.ok(recs.every((r) => r.credits === perCall));
    await until('every charge to settle', async () => b0 - (await balance()) === 100 * perCall); // a round trip after the answer on PostgreSQL
    assert.equal(b0 - (await balance()), 100 * perCall);
    assert.equal(sent(stubs[2]), 100, 'the healthy upstream served each call once');
    assert.ok(stubs[0].faulted >= 2 && stubs[1].faulted >= 2, 'the failing ones were tried');
    for (const id of [a, b, c]) await adminPost('/v1/ai/upstreams/remove', { upstream_id: id });
  });

  test('weights 3:1 split 200 calls about 75/25 (±10 %)', async () => {
    reset();
    const ids = [await addUpstream(0, ['split'], { weight: 3 }), await addUpstream(1, ['split'], { weight: 1 })];
    for (let i = 0; i < 20; i++) await Promise.all(Array.from({ length: 10 }, () => chat('split')));
    const [x, y] = [sent(stubs[0]), sent(stubs[1])];
    assert.equal(x + y, 200);
    assert.ok(x >= 130 && x <= 170, `weight 3 got ${x} of 200`);
    for (const id of ids) await adminPost('/v1/ai/upstreams/remove', { upstream_id: id });
  });

  test('a 429 with Retry-After is honoured: the same upstream is tried again after it, another one at once', async () => {
    reset();
    const only = await addUpstream(0, ['limited']);
    stubs[0].setFault({ status: 429, retryAfter: '1', times: 1 });
    const t0 = Date.now();
    const r = await chat('limited');
    const took = Date.now() - t0;
    assert.equal(r.status, 200, r.text);
    assert.equal(sent(stubs[0]), 2);
    assert.ok(took >= 950, `retried after ${took} ms, Retry-After said 1 s`);
    const [rec] = await usageOf('limited', 1);
    assert.equal(rec.attempts, 2);
    await adminPost('/v1/ai/upstreams/remove', { upstream_id: only });

    // two upstreams: the limited one is skipped for its Retry-After, the other serves at once
    reset();
    const a = await addUpstream(0, ['limited2'], { priority: 0 });
    const b = await addUpstream(1, ['limited2'], { priority: 1 });
    stubs[0].setFault({ status: 429, retryAfter: '30' });
    const t1 = Date.now();
    for (let i = 0; i < 5; i++) assert.equal((await chat('limited2')).status, 200);
    assert.ok(Date.now() - t1 < 5000);
    assert.equal(stubs[0].faulted, 1, 'not called again during its Retry-After');
    assert.equal(sent(stubs[1]), 5);
    for (const id of [a, b]) await adminPost('/v1/ai/upstreams/remove', { upstream_id: id });
  });

  test('a stream broken after its first byte is not retried: the client gets an error event and is charged the estimate', async () => {
    reset();
    const a = await addUpstream(0, ['broken'], { priority: 0 });
    const b = await addUpstream(1, ['broken'], { priority: 1 });
    stubs[0].setFault({ breakStream: true });
    const b0 = await settledBalance();
    const r = await chat('broken', { stream: true });
    assert.equal(r.status, 200);
    const events = r.text.split('\n\n').filter((e) => e.startsWith('data: '));
    assert.ok(events.length >= 2, r.text);
    assert.match(events[0], /chat\.completion\.chunk/);
    const last = JSON.parse(events.at(-1)!.slice(6));
    assert.equal(typeof last.error?.code, 'string', r.text);
    assert.equal(sent(stubs[1]), 0, 'no retry once the first byte went out');
    const [rec] = await usageOf('broken', 1);
    assert.deepEqual([rec.status, rec.error_code, rec.attempts, rec.upstream], ['error', 'upstream_stream_failed', 1, a]);
    assert.ok(rec.credits > 0 && rec.estimated === true, `charged the documented estimate: ${JSON.stringify(rec)}`);
    await until('the charge to settle', async () => b0 - (await balance()) === rec.credits);
    for (const id of [a, b]) await adminPost('/v1/ai/upstreams/remove', { upstream_id: id });
  });

  test('cooldown: after K=2 failures the upstream is skipped; after the period one probe call goes to it', async () => {
    reset();
    const a = await addUpstream(0, ['cool'], { priority: 0 });
    const b = await addUpstream(1, ['cool'], { priority: 1 });
    stubs[0].setFault({ status: 503 });
    for (let i = 0; i < 2; i++) assert.equal((await chat('cool')).status, 200);
    assert.equal(stubs[0].faulted, 2);
    const list = await admin.get('/v1/ai/upstreams/list');
    assert.equal(list.body.items.find((u: any) => u.upstream_id === a).state.cool, 'cooling_down');
    const cooledAt = Date.now();
    for (let i = 0; i < 5; i++) assert.equal((await chat('cool')).status, 200);
    assert.ok(Date.now() - cooledAt < COOLDOWN_MS, 'still in the period (machine too slow for this check)');
    assert.equal(stubs[0].faulted, 2, 'skipped while cooling down');
    assert.equal(sent(stubs[1]), 7);
    // the period ends; the upstream recovered: the next call probes it and it serves again
    stubs[0].setFault(null);
    await sleep(COOLDOWN_MS - (Date.now() - cooledAt) + 100);
    const r = await chat('cool');
    assert.equal(r.status, 200);
    assert.equal(sent(stubs[0]), 3, 'one probe');
    const recs = await usageOf('cool', 8);
    assert.equal(recs[0].upstream, a);
    for (const id of [a, b]) await adminPost('/v1/ai/upstreams/remove', { upstream_id: id });
  });

  test('a disabled or removed upstream gets no more calls', async () => {
    reset();
    const a = await addUpstream(0, ['toggle']);
    const b = await addUpstream(1, ['toggle']);
    await Promise.all(Array.from({ length: 20 }, () => chat('toggle')));
    assert.ok(sent(stubs[0]) > 0 && sent(stubs[1]) > 0);
    assert.equal((await adminPost('/v1/ai/upstreams/update', { upstream_id: a, enabled: false })).status, 200);
    const before = sent(stubs[0]);
    await Promise.all(Array.from({ length: 20 }, () => chat('toggle')));
    assert.equal(sent(stubs[0]), before, 'disabled: no calls');
    await adminPost('/v1/ai/upstreams/update', { upstream_id: a, enabled: true });
    await adminPost('/v1/ai/upstreams/remove', { upstream_id: b });
    const bBefore = sent(stubs[1]);
    await Promise.all(Array.from({ length: 10 }, () => chat('toggle')));
    assert.equal(sent(stubs[1]), bBefore, 'removed: no calls');
    assert.equal(sent(stubs[0]), before + 10);
    await adminPost('/v1/ai/upstreams/remove', { upstream_id: a });
    const gone = await chat('toggle');
    assert.equal(gone.status, 404);
  });
});

describe('every endpoint routes', () => {
  test('text, stream (AI SDK), tts, asr and image jobs fall back from a failing upstream to a healthy one', async () => {
    reset();
    stubs[0].setFault({ status: 500 });
    const chatA = await addUpstream(0, ['every-chat'], { priority: 0 });
    const chatB = await addUpstream(1, ['every-chat'], { priority: 1 });
    const media = ['openai/tts-1', 'openai/whisper-1', 'openai/gpt-image-1'];
    const mediaA = (await adminPost('/v1/ai/upstreams/create', { name: 'media-a', kind: 'openai', base_url: stubs[0].url, api_key: KEYS[0], models: media, priority: 0 })).body.upstream_id;
    const mediaB = (await adminPost('/v1/ai/upstreams/create', { name: 'media-b', kind: 'openai', base_url: stubs[1].url, api_key: KEYS[1], models: media, priority: 1 })).body.upstream_id;
    const u = client(gw.url, user);
    const t = await u.post('/v1/ai/text', { model: 'every-chat', prompt: 'one two' });
    assert.equal(t.status, 200, t.text);
    const s = await call(gw.url, 'POST', '/v1/ai/stream', { token: user, body: { model: 'every-chat', prompt: 'one two' } });
    assert.equal(s.status, 200, s.text);
    assert.match(s.text, /"type":"text-delta"/);
    const tts = await fetch(`${gw.url}/v1/ai/tts`, { method: 'POST', headers: { authorization: `Bearer ${user}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/tts-1', text: 'hello' }) });
    assert.equal(tts.status, 200);
    assert.ok((await tts.arrayBuffer()).byteLength > 0);
    const asr = await u.post('/v1/ai/asr', { model: 'openai/whisper-1', audio: Buffer.alloc(3200, 1).toString('base64') });
    assert.equal(asr.status, 200, asr.text);
    assert.match(asr.body.text, /stub transcript/);
    const job = await u.post('/v1/ai/image/create', { model: 'openai/gpt-image-1', prompt: 'a fox' });
    assert.equal(job.status, 200, job.text);
    const done = await until('the image job', async () => {
      const r = await u.post('/v1/ai/image/result', { job_id: job.body.job_id });
      return r.body.status === 'succeeded' || r.body.status === 'failed' ? r.body : null;
    });
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    for (const [model, mode, up] of [['every-chat', 'text', chatB], ['every-chat', 'stream', chatB], ['openai/tts-1', 'tts', mediaB], ['openai/whisper-1', 'asr', mediaB], ['openai/gpt-image-1', 'image', mediaB]]) {
      const recs = (await usageOf(model, 1)).filter((r) => r.mode === mode);
      assert.equal(recs.length, 1, `${mode}: one record`);
      assert.deepEqual([recs[0].status, recs[0].upstream, recs[0].attempts], ['ok', up, 2], `${mode} fell back`);
    }
    assert.equal(stubs[0].faulted, 5, 'each endpoint tried the failing upstream once');
    for (const id of [chatA, chatB, mediaA, mediaB]) await adminPost('/v1/ai/upstreams/remove', { upstream_id: id });
  });
});

describe('after all calls', () => {
  test('upstream keys never appear in any response, log line or list', async () => {
    const models = await admin.get('/v1/ai/models');
    const usage = await admin.get('/v1/usage/list?limit=200');
    const all = [...seen, models.text, usage.text, gw.stdout(), gw.stderr()].join('\n');
    assert.ok(seen.length > 400);
    for (const k of KEYS) {
      assert.equal(all.includes(k), false, `key ${k.slice(0, 12)}… leaked`);
      assert.equal(all.includes(k.slice(0, -4)), false, `key prefix of ${k.slice(0, 12)}… leaked`);
    }
  });

  test('/metrics parses as Prometheus text and its counters match the calls made', async () => {
    assert.equal((await call(gw.url, 'GET', '/metrics')).status, 401);
    assert.equal((await call(gw.url, 'GET', '/metrics', { token: user })).status, 403);
    const viaToken = await call(gw.url, 'GET', '/metrics', { token: 'metrics-token-for-tests-0123456789' });
    assert.equal(viaToken.status, 200);
    const r = await call(gw.url, 'GET', '/metrics', { token: gw.adminKey });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/plain/);
    const fams = parsePrometheusTextFormat(r.text);
    const fam = (n: string) => fams.find((f) => f.name === n)!;
    const sum = (n: string, where: (l: Record<string, string>) => boolean) =>
      fam(n).metrics.filter((m) => where(m.labels ?? {})).reduce((a, m) => a + Number(m.value ?? m.count ?? 0), 0);
    // requests by route and status
    assert.equal(sum('citygate_http_requests_total', (l) => l.route === '/v1/ai/chat/completions' && l.status === '200'), okChats);
    // (parse-prometheus-text-format merges the label sets of a labelled histogram, so only its type is checked)
    assert.equal(fam('http_server_request_duration_seconds').type, 'HISTOGRAM');
    assert.equal(fam('gen_ai_client_operation_duration_seconds').type, 'HISTOGRAM');
    assert.equal(fam('citygate_overhead_seconds').type, 'HISTOGRAM');
    // upstream attempts, failures and cooldowns by upstream: the trio's healthy upstream served 100
    const trio = await usageOf('trio', 100);
    const healthy = trio[0].upstream;
    assert.equal(sum('citygate_upstream_attempts_total', (l) => l.upstream === healthy && l.model === 'trio' && l.outcome === 'ok'), 100);
    const trioAttempts = trio.reduce((a, x) => a + x.attempts, 0);
    assert.equal(sum('citygate_upstream_attempts_total', (l) => l.model === 'trio'), trioAttempts);
    assert.equal(sum('citygate_upstream_failures_total', (l) => l.reason === 'upstream_timeout') >= 2, true);
    assert.ok(sum('citygate_upstream_cooldowns_total', () => true) >= 3);
    // tokens and credits by city and model
    for (const type of ['input', 'output'] as const) {
      const want = trio.reduce((a, x) => a + x[`${type}_tokens`], 0);
      assert.ok(want > 0);
      assert.equal(sum('citygate_tokens_total', (l) => l.gen_ai_request_model === 'trio' && l.gen_ai_token_type === type && l.city === 'route-city'), want);
    }
    assert.equal(sum('citygate_credits_total', (l) => l.city === 'route-city' && l.model === 'trio'), trio.reduce((a, x) => a + x.credits, 0));
  });
});
