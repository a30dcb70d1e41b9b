// Setup of the client-API tests (models list, embeddings, Responses, Messages): citygate in
// front of stub upstreams — the OpenAI stub as an OpenAI-compatible upstream that serves only
// chat/completions and embeddings (the text provider), the OpenAI stub that also speaks the
// Responses API (the OpenAI slot), and the Anthropic stub (the Messages API) — with
// priced models so every call is charged, and users with plenty of credits.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { startAnthropicStub, type AnthropicStub } from '../stubs/anthropic.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { tokenFor } from './setup.ts';

const CONFIG = `
export default {
  ai: {
    providers: [
      { id: 'claude-stub', kind: 'anthropic', apiKeyEnv: 'CLAUDE_STUB_KEY', baseUrlEnv: 'CLAUDE_STUB_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1' },
      { id: 'sdkcompat', kind: 'openai-compatible', apiKeyEnv: 'TEXTPROVIDER_API_KEY', baseUrlEnv: 'TEXTPROVIDER_BASE_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1', passthrough: false },
    ],
    models: [
      { id: 'embed-small', name: 'Embeddings', provider: 'textprovider', upstream: 'text-embedding-3-small', modes: ['embeddings'] },
      { id: 'embed-sdk', name: 'Embeddings via the AI SDK', provider: 'sdkcompat', upstream: 'text-embedding-3-small', modes: ['embeddings'] },
      { id: 'claude', name: 'Claude (stub)', provider: 'claude-stub', upstream: 'claude-sonnet-4-5', modes: ['text', 'stream', 'compat'] },
      { id: 'claude-slow', name: 'Claude (slow stub)', provider: 'claude-stub', upstream: 'claude-slow-stream', modes: ['messages'] },
    ],
  },
};
`;

/** Credits: 1 per input token, 2 per output token, for every priced model. */
export const PRICE = { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 };
export const cost = (input: number, output: number) => input * 1 + output * 2;

export interface ApiWorld {
  /** The text provider: an OpenAI-compatible API with only chat/completions and embeddings. */
  openai: OpenAIStub;
  /** The OpenAI slot: the same stub that also speaks the Responses API. */
  openaiFull: OpenAIStub;
  anthropic: AnthropicStub;
  gw: TestGateway;
  admin: ReturnType<typeof client>;
  /** A fresh user (own city) with plenty of credits. */
  user(name: string): Promise<string>;
  owner(token: string): { city: string; user: string };
  balance(token: string): Promise<number>;
  /** The caller's usage records, newest first, once at least n exist. */
  records(token: string, n: number): Promise<any[]>;
  /** Waits until the balance is `want` (streams settle just after their end). */
  balanceBecomes(token: string, want: number): Promise<number>;
  close(): Promise<void>;
}

export async function startApiWorld(opts: { env?: Record<string, string> } = {}): Promise<ApiWorld> {
  const openai = await startOpenAIStub({ streamSlowMs: 60 });
  const openaiFull = await startOpenAIStub({ responsesApi: true });
  const anthropic = await startAnthropicStub();
  const dir = tempDir('citygate-apis-');
  writeFileSync(join(dir, 'citygate.config.ts'), CONFIG);
  const gw = await startGateway({
    dir,
    env: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: openai.url,
      TEXTPROVIDER_MODELS: 'stub-model,stub-stream-slow',
      OPENAI_API_KEY: 'sk-stub',
      OPENAI_BASE_URL: openaiFull.url,
      CLAUDE_STUB_KEY: anthropic.apiKey,
      CLAUDE_STUB_URL: anthropic.url,
      BALANCE_INITIAL_CREDITS: '1000000',
      USAGE_FLUSH_MS: '20',
      MODEL_PRICES: JSON.stringify({ 'stub-model': PRICE, 'stub-stream-slow': PRICE, 'embed-small': PRICE, 'embed-sdk': PRICE, claude: PRICE, 'claude-slow': PRICE, 'openai/text-embedding-3-small': PRICE, 'openai/gpt-4.1-mini': PRICE }),
      ...opts.env,
    },
  });
  const admin = client(gw.url, gw.adminKey);
  let n = 0;
  const owners = new Map<string, { city: string; user: string }>();
  const w: ApiWorld = {
    openai,
    openaiFull,
    anthropic,
    gw,
    admin,
    async user(name) {
      const city = `apis-${name}-${++n}`;
      const t = await tokenFor(admin, city, name);
      owners.set(t, { city, user: name });
      return t;
    },
    owner: (t) => owners.get(t)!,
    balance: async (t) => (await client(gw.url, t).get('/v1/balance/me')).body.credits as number,
    async records(t, want) {
      const end = Date.now() + 30_000; // generous: only a missing record waits this long
      for (;;) {
        const r = await client(gw.url, t).get('/v1/usage/me');
        if (r.body.items?.length >= want || Date.now() > end) return r.body.items;
        await new Promise((res) => setTimeout(res, 30));
      }
    },
    async balanceBecomes(t, want) {
      let b = await w.balance(t);
      for (const end = Date.now() + 30_000; b !== want && Date.now() < end; b = await w.balance(t)) await new Promise((res) => setTimeout(res, 20));
      return b;
    },
    async close() {
      await gw.stop();
      await openai.close();
      await openaiFull.close();
      await anthropic.close();
    },
  };
  return w;
}

/** Leaves the user of `token` with no credits at all. */
export async function drain(w: ApiWorld, token: string): Promise<void> {
  const { city, user } = w.owner(token);
  const have = await w.balance(token);
  const r = await w.admin.post('/v1/balance/adjust', { city_id: city, user_id: user, credits: -have, reason: 'test', idempotency_key: `drain-${city}-${user}` });
  if (r.status !== 200) throw new Error(`drain: ${r.status} ${r.text}`);
}
