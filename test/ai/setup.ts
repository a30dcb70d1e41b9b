// Shared setup of the ai tests: one stub OpenAI upstream, one citygate pointed at it (text
// provider slot and OpenAI slot), two cities with a user each.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
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
