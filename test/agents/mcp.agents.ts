// npm run test:agents, the MCP gateway (issue 36): Claude Code with citygate added as an HTTP
// MCP server (`claude mcp add --transport http … --header "Authorization: Bearer …"`) and
// Codex with an `[mcp_servers]` entry (url + bearer_token_env_var), each in a task whose
// scripted model (test/stubs/agent-upstream.ts) calls the city's tool `kb__lookup` through
// citygate's /v1/mcp. The upstream MCP server (built with the official SDK) gets exactly one
// call, with its own secret header and never the user's token; the user is charged exactly:
// one usage record per model call and one of mode 'mcp' at the tool's price, Σ = balance drop.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startAgentsWorld, upstreamCalls, type AgentsWorld } from '../ai/agents-world.ts';
import { client } from '../helpers/http.ts';
import { sleep } from '../helpers/wait.ts';
import { startMcpStub, type McpStub } from '../stubs/mcp-upstream.ts';
import { claudeEnv, installClients, removeWorkdirs, run, workdir } from './harness.ts';

const PRICE = 7000;
const SECRET = 'kb-upstream-secret-42424242';
let w: AgentsWorld;
let kb: McpStub;
let BIN = '';

before(async () => {
  ({ bin: BIN } = installClients('clients', ['claude', 'codex']));
  kb = await startMcpStub({ name: 'kb', secretHeader: ['x-kb-key', SECRET], tools: [{ name: 'lookup', description: 'Look a word up in the knowledge base', answer: (a) => `KB: ${a.text} is a gateway` }] });
  w = await startAgentsWorld({ AI_FETCH_ALLOW_PRIVATE: 'true' });
  // the model's first turn calls the city's MCP tool, whatever prefix the client gives it
  w.stub.plan = (tools) => {
    const t = tools.find((n) => n.endsWith('kb__lookup'));
    return t ? { name: t, args: { text: 'citygate' } } : null;
  };
});
after(async () => {
  await w?.close();
  await kb?.close();
  removeWorkdirs();
});

/** A user of a fresh city that offers the kb server at PRICE credits per call. */
async function userWithTools(name: string): Promise<string> {
  const t = await w.user(name);
  const city = (await client(w.gw.url, t).get('/v1/cities/current')).body.city_id as string;
  const s = await w.admin.post('/v1/mcp/servers/create', { city_id: city, name: 'kb', url: kb.url, auth: { type: 'headers', headers: { 'x-kb-key': SECRET } }, price: PRICE });
  assert.equal(s.status, 200, s.text);
  return t;
}

/** Runs `fn`; then: one kb call, one mcp record at PRICE, one record per model call, Σ = the balance drop. */
async function chargedExactly(t: string, fn: () => Promise<void>): Promise<void> {
  const b0 = await w.balance(t);
  const c0 = upstreamCalls(w);
  const k0 = kb.calls.get('lookup') ?? 0;
  const h0 = kb.requests.length;
  await fn();
  assert.equal((kb.calls.get('lookup') ?? 0) - k0, 1, 'the MCP tool was called once');
  for (const h of kb.requests.slice(h0)) {
    assert.equal(h['x-kb-key'], SECRET);
    assert.ok(!JSON.stringify(h).includes(t), 'the user token never reaches the upstream MCP server');
  }
  const models = upstreamCalls(w) - c0;
  const u = client(w.gw.url, t);
  let records: { mode: string; model: string; credits: number }[] = [];
  let balance = b0;
  for (const end = Date.now() + 30_000; Date.now() < end; await sleep(25)) {
    records = (await u.get('/v1/usage/me?limit=100')).body.items ?? [];
    balance = await w.balance(t);
    if (records.length >= models + 1 && b0 - balance === records.reduce((s, r) => s + r.credits, 0)) break;
  }
  const seen = JSON.stringify(records.map((r) => [r.mode, r.model, r.credits]));
  const mcp = records.filter((r) => r.mode === 'mcp');
  assert.deepEqual(mcp.map((r) => [r.model, r.credits]), [['kb__lookup', PRICE]], seen);
  assert.equal(records.length - mcp.length, models, `one record per model call: ${seen}`);
  assert.equal(b0 - balance, records.reduce((s, r) => s + r.credits, 0), `Σ usage credits = the balance drop: ${seen}`);
}

describe('Claude Code', () => {
  test('citygate added with `claude mcp add --transport http … --header "Authorization: Bearer …"`: calls kb__lookup in a task, charged exactly', async () => {
    const t = await userWithTools('claude-mcp');
    const cwd = workdir();
    const env = claudeEnv(cwd, w.gw.url, { ANTHROPIC_AUTH_TOKEN: t });
    const add = await run(join(BIN, 'claude'), ['mcp', 'add', '--transport', 'http', 'citygate', `${w.gw.url}/v1/mcp`, '--header', `Authorization: Bearer ${t}`], { cwd, env });
    assert.equal(add.code, 0, `claude mcp add: ${add.stdout}\n${add.stderr}`);
    await chargedExactly(t, async () => {
      const r = await run(join(BIN, 'claude'), ['-p', 'Look up citygate in the knowledge base', '--model', 'gpt-4o-mini', '--dangerously-skip-permissions'], { cwd, env });
      assert.equal(r.code, 0, `claude exited ${r.code}: ${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, /AGENT-DONE/);
    });
    const toolResult = JSON.stringify(w.stub.requests.at(-1)?.body ?? {});
    assert.match(toolResult, /KB: citygate is a gateway/, 'the tool result went back to the model');
  });
});

describe('Codex CLI', () => {
  test('citygate as an [mcp_servers] entry (url, bearer_token_env_var): calls kb__lookup in a task, charged exactly', async () => {
    const t = await userWithTools('codex-mcp');
    const cwd = workdir();
    const home = join(cwd, '.codex');
    mkdirSync(home);
    writeFileSync(
      join(home, 'config.toml'),
      [
        'model = "gpt-4o-mini"',
        'model_provider = "citygate"',
        '',
        '[model_providers.citygate]',
        'name = "citygate"',
        `base_url = "${w.gw.url}/v1/ai"`,
        'env_key = "CITYGATE_TOKEN"',
        'wire_api = "responses"',
        '',
        '[mcp_servers.citygate]',
        `url = "${w.gw.url}/v1/mcp"`,
        'bearer_token_env_var = "CITYGATE_TOKEN"',
        '',
      ].join('\n'),
    );
    await chargedExactly(t, async () => {
      const r = await run(join(BIN, 'codex'), ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', 'Look up citygate in the knowledge base'], {
        cwd,
        env: { HOME: cwd, CODEX_HOME: home, CITYGATE_TOKEN: t },
      });
      assert.equal(r.code, 0, `codex exited ${r.code}: ${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, /AGENT-DONE/);
    });
    assert.match(JSON.stringify(w.stub.requests.at(-1)?.body ?? {}), /KB: citygate is a gateway/, 'the tool result went back to the model');
  });
});
