// npm run test:agents: the setups of docs/accounts.md "Keys for agents", run with the real
// clients pinned in test/agents/clients/ — Claude Code with the key as ANTHROPIC_API_KEY
// (x-api-key) and as ANTHROPIC_AUTH_TOKEN (Bearer), and Codex CLI with the key in its provider
// block's env_key — against a citygate with scripted upstreams (test/ai/agents-world.ts). Each
// run writes the file it was asked to, is charged exactly to the key's user, and every usage
// record carries the key. (Cursor and the `openai` SDK use an OpenAI base URL and the key as
// Bearer: test/accounts/keys.test.ts.)
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startAgentsWorld, upstreamCalls, type AgentsWorld } from '../ai/agents-world.ts';
import { client } from '../helpers/http.ts';
import { claudeEnv, installClients, removeWorkdirs, run, workdir } from './harness.ts';

let w: AgentsWorld;
let BIN = '';
let current = '';

before(async () => {
  ({ bin: BIN } = installClients('clients', ['claude', 'codex']));
  w = await startAgentsWorld();
  w.stub.plan = (tools) => {
    if (tools.includes('Write')) return { name: 'Write', args: { file_path: join(current, 'hello.txt'), content: 'hello' } };
    if (tools.includes('exec_command')) return { name: 'exec_command', args: { cmd: 'echo hello > hello.txt' } };
    return null;
  };
});
after(async () => {
  await w?.close();
  removeWorkdirs();
});

/** A user (login token) and a key they made for one agent, with a weekly budget. */
async function userWithKey(name: string): Promise<{ token: string; key: string; id: string }> {
  const token = await w.user(name);
  const r = await client(w.gw.url, token).post('/v1/accounts/keys/create', { name: `${name} agent`, budget: { credits: 50_000_000, window: 'week' } });
  assert.equal(r.status, 200, r.text);
  return { token, key: r.body.secret, id: r.body.key.id };
}

async function chargedToKey(u: { token: string; id: string }, fn: () => Promise<void>) {
  const b0 = await w.balance(u.token);
  const c0 = upstreamCalls(w);
  const tools0 = w.stub.toolCalls;
  await fn();
  assert.ok(w.stub.toolCalls > tools0, 'the upstream asked for a tool call');
  const records = await w.settled(u.token, b0, c0);
  assert.ok(records.length > 0 && records.every((r) => r.key_id === u.id), `every usage record carries the key: ${JSON.stringify(records.map((r) => r.key_id))}`);
}

for (const variable of ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN'] as const) {
  test(`Claude Code with the key as ${variable}: writes the file, charged exactly to the key`, async () => {
    const u = await userWithKey(`claude-${variable === 'ANTHROPIC_API_KEY' ? 'apikey' : 'authtoken'}`);
    const cwd = (current = workdir());
    await chargedToKey(u, async () => {
      const r = await run(join(BIN, 'claude'), ['-p', 'Write hello to hello.txt', '--model', 'gpt-4o-mini', '--dangerously-skip-permissions'], {
        cwd,
        env: claudeEnv(cwd, w.gw.url, variable === 'ANTHROPIC_API_KEY' ? { ANTHROPIC_API_KEY: u.key } : { ANTHROPIC_AUTH_TOKEN: u.key }),
      });
      assert.equal(r.code, 0, `claude exited ${r.code}: ${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, /AGENT-DONE/);
      assert.equal(readFileSync(join(cwd, 'hello.txt'), 'utf8'), 'hello');
      assert.ok(!r.stdout.includes(u.key) && !r.stderr.includes(u.key));
    });
  });
}

test('Codex CLI with the key in env_key: runs the command, charged exactly to the key', async () => {
  const u = await userWithKey('codex');
  const cwd = (current = workdir());
  const home = join(cwd, '.codex');
  mkdirSync(home);
  writeFileSync(
    join(home, 'config.toml'),
    `model = "gpt-4o-mini"\nmodel_provider = "citygate"\n\n[model_providers.citygate]\nname = "citygate"\nbase_url = "${w.gw.url}/v1/ai"\nenv_key = "CITYGATE_API_KEY"\nwire_api = "responses"\n`,
  );
  await chargedToKey(u, async () => {
    const r = await run(join(BIN, 'codex'), ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', 'Write hello to hello.txt'], {
      cwd,
      env: { HOME: cwd, CODEX_HOME: home, CITYGATE_API_KEY: u.key },
    });
    assert.equal(r.code, 0, `codex exited ${r.code}: ${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /AGENT-DONE/);
    assert.equal(readFileSync(join(cwd, 'hello.txt'), 'utf8').trim(), 'hello');
  });
});
