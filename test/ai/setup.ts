// Shared setup of the ai tests: one stub OpenAI upstream, one citygate pointed at it (text
// provider slot and OpenAI slot), two cities with a user each.
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema, type UIMessage } from 'ai';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { sleep } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub, type OpenAIStubOptions } from '../stubs/openai.ts';

export interface AiWorld {
  stub: OpenAIStub;
  gw: TestGateway;
  admin: ReturnType<typeof client>;
  /** User tokens: alice in city-a, bob in city-b. */
  alice: string;
  bob: string;
  close(): Promise<void>;
}

/** Models the tests register through citygate.config.ts (the documented format). */
export const PROJECT_CONFIG = `
export default {
  ai: {
    models: [
      { id: 'slow-image', name: 'Slow image', provider: 'openai', upstream: 'stub-slow', modes: ['image'] },
      { id: 'stub-video', name: 'Stub video', provider: 'openai', upstream: 'sora-2', modes: ['video'], prices: { per_second: 100000 } },
      { id: 'failing-video', name: 'Failing video', provider: 'openai', upstream: 'stub-video-fail', modes: ['video'] },
      { id: 'translated', name: 'Translated chat', provider: 'stubcompat', upstream: 'stub-model', modes: ['text', 'stream', 'compat'] },
      { id: 'translated-no-usage', name: 'Translated chat, no usage', provider: 'stubcompat', upstream: 'stub-no-usage', modes: ['text', 'stream', 'compat'] },
      { id: 'asr-no-duration', name: 'Transcription without a duration', provider: 'openai', upstream: 'stub-no-duration', modes: ['asr'], prices: { per_second: 100 } },
      { id: 'unreachable', name: 'Nobody home', provider: 'deadend', upstream: 'stub-model', modes: ['text', 'stream', 'compat'] },
    ],
    providers: [
      { id: 'stubcompat', kind: 'openai-compatible', apiKeyEnv: 'TEXTPROVIDER_API_KEY', baseUrlEnv: 'TEXTPROVIDER_BASE_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1', passthrough: false },
      { id: 'deadend', kind: 'openai-compatible', apiKeyEnv: 'TEXTPROVIDER_API_KEY', defaultBaseUrl: 'http://127.0.0.1:9/v1' },
    ],
  },
};
`;

/** Env for tests that call priced models: every new user starts with plenty of credits. */
export const RICH_USERS = { BALANCE_INITIAL_CREDITS: '1000000000', USAGE_FLUSH_MS: '20' };

export async function tokenFor(admin: ReturnType<typeof client>, cityId: string, userId: string): Promise<string> {
  const c = await admin.post('/v1/cities/create', { name: cityId, city_id: cityId });
  if (c.status !== 200 && c.status !== 409) throw new Error(`city create: ${c.status} ${c.text}`);
  const t = await admin.post('/v1/cities/tokens/apply', { city_id: cityId, user_id: userId });
  if (t.status !== 200) throw new Error(`token apply: ${t.status} ${t.text}`);
  return t.body.user_token;
}

/** A user of `cityId` whose balance is exactly `credits`: its token, a client, and a balance reader. */
export async function userWithCredits(w: AiWorld, cityId: string, userId: string, credits: number) {
  const token = await tokenFor(w.admin, cityId, userId);
  const u = client(w.gw.url, token);
  const balance = async () => (await u.get('/v1/balance/me')).body.credits as number;
  const r = await w.admin.post('/v1/balance/adjust', { city_id: cityId, user_id: userId, credits: credits - (await balance()), reason: 'test', idempotency_key: `set-${userId}` });
  assert.equal(r.status, 200, r.text);
  assert.equal(await balance(), credits);
  return { token, u, balance };
}

export async function startAiWorld(opts: { stub?: OpenAIStubOptions; env?: Record<string, string> } = {}): Promise<AiWorld> {
  const stub = await startOpenAIStub({ slowMs: 1500, streamSlowMs: 100, videoPolls: 1, ...opts.stub });
  const dir = tempDir('citygate-ai-');
  writeFileSync(join(dir, 'citygate.config.ts'), PROJECT_CONFIG);
  const gw = await startGateway({
    dir,
    env: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model,stub-500,stub-400,stub-slow,stub-stream-slow,aliased=stub-model',
      OPENAI_BASE_URL: stub.url,
      // A realistic deadline: a loaded machine must not turn an ordinary call into a 504.
      // The timeout itself is tested on its own gateway (timeout.test.ts).
      AI_UPSTREAM_TIMEOUT_MS: '60000',
      AI_VIDEO_POLL_MS: '50',
      // These tests check how one upstream answer maps to what the caller sees; retries,
      // fallbacks and cooldowns have their own tests (test/ai/routing.test.ts).
      AI_MAX_ATTEMPTS: '1',
      AI_COOLDOWN_FAILURES: '1000',
      ...opts.env,
    },
  });
  const admin = client(gw.url, gw.adminKey);
  const alice = await tokenFor(admin, 'city-a', 'alice');
  const bob = await tokenFor(admin, 'city-b', 'bob');
  const world: AiWorld = {
    stub,
    gw,
    admin,
    alice,
    bob,
    async close() {
      await world.gw.stop(); // the current one: a test may have restarted it
      await stub.close();
    },
  };
  return world;
}

/** Ledger kinds that are not a call's: what an admin, a payment or the first sight of a user moves. */
const NOT_CALLS = new Set(['grant', 'adjust', 'topup']);

/**
 * What a user's priced calls were charged, once the process has written them: the gateway
 * serves holds from a credit lease and writes charges back every BALANCE_FLUSH_MS (default
 * 200 ms) as one ledger row of kind 'charge' per flush. Waits until the balance is `start`
 * minus `want`, the usage records' credits sum to `want` and the user's ledger rows of calls
 * to −`want`; then checks that nothing more lands for a few flush windows (a second charge of
 * the same call would). Those rows are 'charge' rows, each counting its calls in its reason
 * ("N calls"), unless `kinds` allows the per-call holds (hold, settle, release) too.
 * Returns the usage records and the ledger, newest first.
 */
export async function chargedOnce(base: string, token: string, start: number, want: number, opts: { records: number; kinds?: string[] }) {
  const kinds = opts.kinds ?? ['charge'];
  const u = client(base, token);
  const read = async () => {
    const [b, usage, history] = await Promise.all([u.get('/v1/balance/me'), u.get('/v1/usage/me?limit=100'), u.get('/v1/balance/history?limit=100')]);
    const records = (usage.body.items ?? []) as any[];
    const ledger = (history.body.items ?? []) as any[];
    const charges = ledger.filter((e) => !NOT_CALLS.has(e.kind));
    return {
      balance: b.body.credits as number,
      records,
      ledger,
      used: records.reduce((s, r) => s + r.credits, 0),
      charged: charges.reduce((s, e) => s - e.credits, 0), // 0, not -0, when nothing was charged
      calls: charges.reduce((s, e) => s + Number(/^(\d+) calls?$/.exec(e.reason ?? '')?.[1] ?? NaN), 0),
    };
  };
  const landed = (s: Awaited<ReturnType<typeof read>>) => s.records.length >= opts.records && s.balance === start - want && s.used === want && s.charged === want;
  let s = await read();
  for (const end = Date.now() + 30_000; !landed(s) && Date.now() < end; s = await read()) await sleep(25);
  const seen = JSON.stringify({ balance: s.balance, records: s.records.map((r) => [r.status, r.credits]), ledger: s.ledger.map((e) => [e.kind, e.credits, e.reason]) });
  assert.equal(s.records.length, opts.records, `usage records: ${seen}`);
  assert.equal(s.used, want, `the usage records' credits: ${seen}`);
  assert.equal(s.balance, start - want, `the balance: ${seen}`);
  assert.equal(s.charged, want, `the ledger's rows of calls: ${seen}`);
  for (const e of s.ledger) assert.ok(NOT_CALLS.has(e.kind) || kinds.includes(e.kind), `a ${e.kind} row: ${seen}`);
  // Each priced call is counted once in the charge rows' reasons ("N calls").
  if (kinds.length === 1) assert.equal(s.calls, s.records.filter((r) => r.credits > 0).length, `calls in the charge rows: ${seen}`);
  await sleep(3 * 200 + 100);
  const later = await read();
  assert.deepEqual([later.balance, later.charged, later.records.length], [s.balance, s.charged, s.records.length], 'charged once: nothing more landed');
  return { records: s.records, ledger: s.ledger };
}

/** The last UI message a /v1/ai/stream answer assembles to, read as the AI SDK's client reads it (every chunk checked against its schema). */
export async function lastUIMessage(body: ReadableStream<Uint8Array>): Promise<UIMessage | undefined> {
  const chunks = parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(r, c) {
        if (!r.success) throw r.error;
        c.enqueue(r.value);
      },
    }),
  );
  let last: UIMessage | undefined;
  for await (const m of readUIMessageStream({ stream: chunks as any })) last = m;
  return last;
}
