// A citygate in front of scripted agent upstreams (test/stubs/agent-upstream.ts), as a coding
// agent's user meets it: the same stub behind an Anthropic provider (Messages forwarded), an
// OpenAI provider (Responses forwarded) and an OpenAI-compatible one (Chat Completions passed
// through; Messages, Responses and the Gemini API translated), and a Gemini stub that reports
// cached content (the Gemini API forwarded; scripted like the agent stub when its plan is set).
// Models are priced by the catalog (genai-prices), as a city reselling them would price them.
// Used by the replay and cache-pricing tests (npm test) and by the real-client suite
// (npm run test:agents).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { sleep } from '../helpers/wait.ts';
import { startAgentStub, type AgentStub } from '../stubs/agent-upstream.ts';
import { startGeminiStub, type GeminiStub } from '../stubs/gemini.ts';
import { tokenFor } from './setup.ts';

const CONFIG = `
export default {
  ai: {
    providers: [
      { id: 'agent-anthropic', kind: 'anthropic', apiKeyEnv: 'AGENT_KEY', baseUrlEnv: 'AGENT_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1' },
      { id: 'agent-openai', kind: 'openai', apiKeyEnv: 'AGENT_KEY', baseUrlEnv: 'AGENT_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1' },
      { id: 'agent-compat', kind: 'openai-compatible', apiKeyEnv: 'AGENT_KEY', baseUrlEnv: 'AGENT_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1' },
      { id: 'agent-gemini', kind: 'google', apiKeyEnv: 'AGENT_GEMINI_KEY', baseUrlEnv: 'AGENT_GEMINI_URL', defaultBaseUrl: 'http://127.0.0.1:9/v1beta' },
    ],
    models: [
      // an alias id Claude Code does not know as Claude, on an Anthropic upstream (forwarded)
      { id: 'fwd-sonnet', name: 'Sonnet (alias)', provider: 'agent-anthropic', upstream: 'claude-sonnet-4-5', modes: ['text', 'stream', 'compat'] },
      { id: 'claude-sonnet-4-5', name: 'Sonnet', provider: 'agent-anthropic', upstream: 'claude-sonnet-4-5', modes: ['text', 'stream', 'compat'] },
      // non-Claude models on an OpenAI-compatible upstream (Messages and Responses translated)
      { id: 'gpt-4o-mini', name: 'GPT-4o mini (compatible)', provider: 'agent-compat', upstream: 'gpt-4o-mini', modes: ['text', 'stream', 'compat'] },
      { id: 'deepseek-chat', name: 'DeepSeek (compatible)', provider: 'agent-compat', upstream: 'deepseek-chat', modes: ['text', 'stream', 'compat'] },
      // an OpenAI upstream (Responses forwarded)
      { id: 'gpt-4.1-mini', name: 'GPT-4.1 mini (OpenAI)', provider: 'agent-openai', upstream: 'gpt-4.1-mini', modes: ['text', 'stream', 'compat'] },
      { id: 'flash', name: 'Gemini (cached content)', provider: 'agent-gemini', upstream: 'gemini-2.5-flash', modes: ['text', 'stream', 'compat'] },
      // Google's own id on a Google upstream, as Gemini CLI's users name it (the Gemini API forwarded)
      { id: 'gemini-2.5-flash', name: 'Gemini 2.5 Flash (Google)', provider: 'agent-gemini', upstream: 'gemini-2.5-flash', modes: ['text', 'stream', 'compat'] },
    ],
  },
};
`;

/** Catalog prices (credits per 1M tokens) the tests compute with: genai-prices as of the lock file. */
export const SONNET = { input: 3_000_000, write5m: 3_750_000, write1h: 6_000_000, read: 300_000, output: 15_000_000 };
export const GPT_4O_MINI = { input: 150_000, read: 75_000, output: 600_000 };
export const GEMINI_FLASH = { input: 300_000, read: 30_000, output: 2_500_000 };

export interface AgentsWorld {
  stub: AgentStub;
  gemini: GeminiStub;
  gw: TestGateway;
  admin: ReturnType<typeof client>;
  /** A fresh user (own city) with plenty of credits. */
  user(name: string): Promise<string>;
  balance(token: string): Promise<number>;
  /**
   * What the user's calls cost, once every record landed: asserts one usage record per
   * upstream call made since `calls0`, Σ records' credits = the balance drop; returns the records.
   */
  settled(token: string, start: number, calls0: number): Promise<any[]>;
  close(): Promise<void>;
}

export async function startAgentsWorld(env: Record<string, string> = {}): Promise<AgentsWorld> {
  const stub = await startAgentStub();
  const gemini = await startGeminiStub({ cachedTokens: 3 });
  const dir = tempDir('citygate-agents-');
  writeFileSync(join(dir, 'citygate.config.ts'), CONFIG);
  const gw = await startGateway({
    dir,
    env: {
      AGENT_KEY: 'sk-agent-stub',
      AGENT_URL: stub.url,
      AGENT_GEMINI_KEY: 'gemini-stub-key',
      AGENT_GEMINI_URL: gemini.url,
      BALANCE_INITIAL_CREDITS: '100000000',
      USAGE_FLUSH_MS: '20',
      AI_UPSTREAM_TIMEOUT_MS: '60000',
      AI_MAX_ATTEMPTS: '1',
      ...env,
    },
  });
  const admin = client(gw.url, gw.adminKey);
  let n = 0;
  const w: AgentsWorld = {
    stub,
    gemini,
    gw,
    admin,
    user: (name) => tokenFor(admin, `agents-${name.replace(/[^A-Za-z0-9_-]/g, '-')}-${++n}`, name.replace(/[^A-Za-z0-9_-]/g, '-')),
    balance: async (t) => (await client(gw.url, t).get('/v1/balance/me')).body.credits as number,
    async settled(t, start, calls0) {
      const want = upstreamCalls(w) - calls0;
      const u = client(gw.url, t);
      let records: any[] = [];
      let balance = start;
      for (const end = Date.now() + 30_000; Date.now() < end; await sleep(25)) {
        records = (await u.get('/v1/usage/me?limit=100')).body.items ?? [];
        balance = await w.balance(t);
        if (records.length >= want && start - balance === records.reduce((s, r) => s + r.credits, 0)) break;
      }
      const seen = JSON.stringify(records.map((r) => [r.model, r.status, r.credits, r.input_tokens, r.cached_tokens, r.cache_write_tokens]));
      assert.equal(records.length, want, `one usage record per upstream call: ${seen}`);
      assert.equal(start - balance, records.reduce((s, r) => s + r.credits, 0), `Σ usage credits = the balance drop: ${seen}`);
      for (const r of records) assert.ok(r.credits > 0, `every call charged: ${seen}`);
      return records;
    },
    async close() {
      await gw.stop();
      await stub.close();
      await gemini.close();
    },
  };
  return w;
}

/** The calls the upstreams have answered so far (the base of settled()). */
export const upstreamCalls = (w: AgentsWorld) => w.stub.calls + w.gemini.requests.filter((r) => r.method === 'POST' && /:(stream)?[gG]enerateContent$/.test(r.path)).length;
// (Gemini's countTokens is free and makes no usage record: not a call here)

/** An SSE body's events, as { event, data } with data parsed (the [DONE] marker left out). */
export function sseEvents(text: string): { event?: string; data: any }[] {
  const out: { event?: string; data: any }[] = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    const event = /^event:\s*(.+)$/m.exec(block)?.[1];
    const data = block
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
      .join('\n');
    if (!data || data === '[DONE]') continue;
    out.push({ event, data: JSON.parse(data) });
  }
  return out;
}
