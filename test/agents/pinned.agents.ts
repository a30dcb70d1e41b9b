// npm run test:agents: the real agent clients against a citygate with scripted upstreams
// (test/stubs/agent-upstream.ts: the first turn asks for a tool call, the turn after the
// tool result gives the final answer). Claude Code, Codex CLI and the OpenAI Agents SDK are
// installed, at the versions pinned in test/agents/clients/, into .agents-cache/ (git-ignored,
// reused while the lock file is unchanged), never into the project's dependencies. Each run
// checks what the user would see (the file written, the final output) and the exact charge:
// one usage record per upstream call, Σ usage credits = the balance drop.
//
// Not part of `npm test` (its name does not end in .test.ts): the install takes a while.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startAgentsWorld, upstreamCalls, type AgentsWorld } from '../ai/agents-world.ts';
import { claudeEnv, installClients, removeWorkdirs, run, workdir } from './harness.ts';

let w: AgentsWorld;
let CACHE = '';
let BIN = '';

before(async () => {
  ({ dir: CACHE, bin: BIN } = installClients('clients', ['claude', 'codex']));
  w = await startAgentsWorld();
  // one script for every client: each writes hello.txt (or asks the weather) with its own tool
  w.stub.plan = (tools) => {
    if (tools.includes('Write')) return { name: 'Write', args: { file_path: join(current, 'hello.txt'), content: 'hello' } };
    if (tools.includes('exec_command')) return { name: 'exec_command', args: { cmd: 'echo hello > hello.txt' } };
    if (tools.includes('get_weather')) return { name: 'get_weather', args: { city: 'Paris' } };
    return null;
  };
});
after(async () => {
  await w?.close();
  removeWorkdirs();
});

/** The working directory of the run in progress (the Write tool takes an absolute path). */
let current = '';

async function charged(t: string, fn: () => Promise<void>) {
  const b0 = await w.balance(t);
  const c0 = upstreamCalls(w);
  const tools0 = w.stub.toolCalls;
  await fn();
  assert.ok(w.stub.toolCalls > tools0, 'the upstream asked for a tool call');
  return w.settled(t, b0, c0);
}

describe('Claude Code', () => {
  for (const [label, model] of [
    ['a non-Claude catalog model on a translated upstream', 'gpt-4o-mini'],
    ['an alias id on an Anthropic upstream (forwarded)', 'fwd-sonnet'],
  ] as const) {
    test(`-p with ${label} (${model}): writes the file, prints the answer, charged exactly`, async () => {
      const t = await w.user(`claude-${model}`);
      const cwd = (current = workdir());
      await charged(t, async () => {
        const r = await run(join(BIN, 'claude'), ['-p', 'Write hello to hello.txt', '--model', model, '--dangerously-skip-permissions'], {
          cwd,
          env: claudeEnv(cwd, w.gw.url, { ANTHROPIC_AUTH_TOKEN: t }),
        });
        assert.equal(r.code, 0, `claude exited ${r.code}: ${r.stdout}\n${r.stderr}`);
        assert.match(r.stdout, /AGENT-DONE/);
        assert.equal(readFileSync(join(cwd, 'hello.txt'), 'utf8'), 'hello');
      });
    });
  }
});

describe('Codex CLI, default config', () => {
  for (const [label, model] of [
    ['a translated model', 'gpt-4o-mini'],
    ['forwarded to an OpenAI upstream', 'gpt-4.1-mini'],
  ] as const) {
    test(`exec on ${label} (${model}): runs the command, prints the answer, charged exactly`, async () => {
      const t = await w.user(`codex-${model}`);
      const cwd = (current = workdir());
      const home = join(cwd, '.codex');
      mkdirSync(home);
      // The provider block docs/ai.md gives; nothing else is configured.
      writeFileSync(
        join(home, 'config.toml'),
        `model = "${model}"\nmodel_provider = "citygate"\n\n[model_providers.citygate]\nname = "citygate"\nbase_url = "${w.gw.url}/v1/ai"\nenv_key = "CITYGATE_TOKEN"\nwire_api = "responses"\n`,
      );
      await charged(t, async () => {
        const r = await run(join(BIN, 'codex'), ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', 'Write hello to hello.txt'], {
          cwd,
          env: { HOME: cwd, CODEX_HOME: home, CITYGATE_TOKEN: t },
        });
        assert.equal(r.code, 0, `codex exited ${r.code}: ${r.stdout}\n${r.stderr}`);
        assert.match(r.stdout, /AGENT-DONE/);
        assert.equal(readFileSync(join(cwd, 'hello.txt'), 'utf8').trim(), 'hello');
      });
    });
  }
});

describe('OpenAI Agents SDK', () => {
  for (const [api, model] of [
    ['responses', 'gpt-4o-mini'],
    ['responses', 'gpt-4.1-mini'],
    ['chat', 'gpt-4o-mini'],
  ] as const) {
    for (const stream of ['0', '1']) {
      test(`${api === 'chat' ? 'Chat Completions' : 'Responses'} model ${model}${stream === '1' ? ', streamed' : ''}: calls the tool, final output, charged exactly`, async () => {
        const t = await w.user(`sdk-${api}-${stream}`);
        await charged(t, async () => {
          const r = await run(process.execPath, [join(CACHE, 'agents-sdk-run.mjs')], {
            cwd: CACHE,
            env: { CITYGATE_URL: `${w.gw.url}/v1/ai`, CITYGATE_TOKEN: t, MODEL: model, API: api, STREAM: stream },
          });
          assert.equal(r.code, 0, `agent exited ${r.code}: ${r.stdout}\n${r.stderr}`);
          assert.equal(r.stdout, 'AGENT-DONE');
          assert.match(r.stderr, /tool get_weather Paris/);
        });
      });
    }
  }
});
