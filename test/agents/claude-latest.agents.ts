// npm run test:agents: Claude Code at the newest version npm served when this set was pinned
// (test/agents/claude-latest/, 2.1.332; the long-pinned one is in test/agents/clients/), so a
// release that changes what Claude Code sends shows up here: a session of 20 model turns (19
// Bash tool calls, each appending a line to a file, then the final answer), on a non-Claude
// model translated for an OpenAI-compatible upstream and on an Anthropic upstream (forwarded).
// Each run: the file holds the 19 lines, the final answer printed, one usage record per
// upstream call, every call charged, Σ usage credits = the balance drop.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startAgentsWorld, upstreamCalls, type AgentsWorld } from '../ai/agents-world.ts';
import { claudeEnv, installClients, removeWorkdirs, run, workdir } from './harness.ts';

const VERSION = JSON.parse(readFileSync(new URL('./claude-latest/package.json', import.meta.url), 'utf8')).dependencies['@anthropic-ai/claude-code'] as string;
const TURNS = 20;

let w: AgentsWorld;
let BIN = '';

before(async () => {
  ({ bin: BIN } = installClients('claude-latest', ['claude']));
  w = await startAgentsWorld();
  w.stub.toolTurns = TURNS - 1;
  w.stub.plan = (tools) => (tools.includes('Bash') ? { name: 'Bash', args: { command: 'echo step >> steps.txt', description: 'Append a step' } } : null);
});
after(async () => {
  await w?.close();
  removeWorkdirs();
});

describe(`Claude Code ${VERSION} (newest), a ${TURNS}-turn session`, () => {
  for (const [label, model] of [
    ['a non-Claude catalog model on a translated upstream', 'gpt-4o-mini'],
    ['an alias id on an Anthropic upstream (forwarded)', 'fwd-sonnet'],
  ] as const) {
    test(`-p with ${label} (${model}): ${TURNS} model turns, the work done, charged exactly`, async () => {
      const t = await w.user(`claude-latest-${model}`);
      const cwd = workdir();
      const b0 = await w.balance(t);
      const c0 = upstreamCalls(w);
      const tools0 = w.stub.toolCalls;
      const t0 = Date.now();
      const r = await run(join(BIN, 'claude'), ['-p', `Append a line to steps.txt ${TURNS - 1} times, one Bash call each`, '--model', model, '--dangerously-skip-permissions', '--max-turns', String(TURNS + 5)], {
        cwd,
        env: claudeEnv(cwd, w.gw.url, { ANTHROPIC_AUTH_TOKEN: t }),
        timeoutMs: 300_000,
      });
      const took = Date.now() - t0;
      assert.equal(r.code, 0, `claude exited ${r.code}: ${r.stdout}\n${r.stderr.slice(-3000)}`);
      assert.match(r.stdout, /AGENT-DONE/);
      assert.equal(w.stub.toolCalls - tools0, TURNS - 1, 'tool calls asked for');
      assert.equal(readFileSync(join(cwd, 'steps.txt'), 'utf8'), 'step\n'.repeat(TURNS - 1));
      const records = await w.settled(t, b0, c0);
      assert.ok(records.length >= TURNS, `${records.length} upstream calls for ${TURNS} turns`);
      process.stderr.write(`# claude-code ${VERSION} ${model}: ${records.length} upstream calls, ${took} ms\n`);
    });
  }
});
