// npm run test:agents: Codex CLI (0.171.0, pinned in test/agents/clients/) on its built-in
// OpenAI provider pointed at citygate (`openai_base_url` in config.toml, the key in
// CODEX_API_KEY), in a session long enough to compact: model_auto_compact_token_limit is below
// what one turn reports, so after the first tool call Codex compacts (a compaction_trigger
// item) and goes on from the compacted conversation; then the session is resumed for one more
// user turn (`codex exec resume --last`), which carries the compacted history. Forwarded to an
// OpenAI upstream (OpenAI compacts) and translated (the routed model writes the summary,
// citygate seals it), over WebSocket as Codex chooses it (with its generate: false warm-up)
// and over HTTP (a gateway with RESPONSES_WEBSOCKET=off refuses the upgrade, as Workers do;
// Codex falls back). Each run: the file written, the final answers printed, one compaction in
// the first run, and Σ usage credits = the balance drop (one record per upstream call, plus
// the free warm-ups).
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { client } from '../helpers/http.ts';
import { sleep } from '../helpers/wait.ts';
import { startAgentsWorld, upstreamCalls, type AgentsWorld } from '../ai/agents-world.ts';
import { installClients, removeWorkdirs, run, workdir } from './harness.ts';

let ws: AgentsWorld;
/** A gateway with RESPONSES_WEBSOCKET=off: Codex's upgrade is refused (as on Workers) and it goes on over HTTP. */
let http: AgentsWorld;
let w: AgentsWorld;
let BIN = '';

before(async () => {
  ({ bin: BIN } = installClients('clients', ['codex']));
  [ws, http] = await Promise.all([startAgentsWorld(), startAgentsWorld({ RESPONSES_WEBSOCKET: 'off' })]);
  for (const x of [ws, http]) x.stub.plan = (tools) => (tools.includes('exec_command') ? { name: 'exec_command', args: { cmd: 'echo hello > hello.txt' } } : null);
});
after(async () => {
  await Promise.all([ws?.close(), http?.close()]);
  removeWorkdirs();
});

/** Waits until the user's records are in and settled; asserts the money. */
async function settled(t: string, b0: number, calls: number) {
  const u = client(w.gw.url, t);
  let records: any[] = [];
  let balance = b0;
  for (const end = Date.now() + 30_000; Date.now() < end; await sleep(25)) {
    records = (await u.get('/v1/usage/me?limit=200')).body.items ?? [];
    balance = await w.balance(t);
    const paid = records.filter((r) => !/warm-up/.test(r.note ?? ''));
    if (paid.length >= calls && b0 - balance === records.reduce((s, r) => s + r.credits, 0)) break;
  }
  const seen = JSON.stringify(records.map((r) => [r.model, r.status, r.credits, r.note]));
  const warm = records.filter((r) => /warm-up/.test(r.note ?? ''));
  assert.equal(records.length - warm.length, calls, `one usage record per upstream call: ${seen}`);
  for (const r of warm) assert.deepEqual([r.status, r.credits, r.input_tokens], ['ok', 0, 0], `a warm-up is free: ${seen}`);
  for (const r of records) if (!warm.includes(r)) assert.ok(r.credits > 0 && r.status === 'ok', `every model call charged: ${seen}`);
  assert.equal(b0 - balance, records.reduce((s, r) => s + r.credits, 0), `Σ usage credits = the balance drop: ${seen}`);
  return { records, warm };
}

const opened = () => (w.gw.stdout().match(/responses websocket opened/g) ?? []).length;

describe('Codex CLI on its built-in OpenAI provider (openai_base_url), a session that compacts', () => {
  for (const [label, model] of [
    ['forwarded to an OpenAI upstream', 'gpt-4.1-mini'],
    ['translated', 'gpt-4o-mini'],
  ] as const) {
    for (const transport of ['websocket', 'http'] as const) {
      test(`${label} (${model}), over ${transport === 'websocket' ? 'WebSocket, as Codex chooses it' : 'HTTP (the upgrade refused)'}: compacts once, every turn after it succeeds, charged exactly`, async () => {
        w = transport === 'websocket' ? ws : http;
        const t = await w.user(`codex-oa-${model}-${transport}`);
        const cwd = workdir();
        const home = join(cwd, '.codex');
        mkdirSync(home);
        writeFileSync(
          join(home, 'config.toml'),
          [
            `model = "${model}"`,
            `openai_base_url = "${w.gw.url}/v1"`,
            // below one turn's usage (the stub reports 1362 tokens a call): Codex compacts after the first tool call
            'model_auto_compact_token_limit = 1000',
            '',
          ].join('\n'),
        );
        const b0 = await w.balance(t);
        const c0 = upstreamCalls(w);
        const k0 = w.stub.compactions;
        const s0 = opened();
        const t0 = Date.now();
        const r = await run(join(BIN, 'codex'), ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', 'Write hello to hello.txt'], {
          cwd,
          env: { HOME: cwd, CODEX_HOME: home, CODEX_API_KEY: t },
        });
        assert.equal(r.code, 0, `codex exited ${r.code}: ${r.stdout}\n${r.stderr.slice(-3000)}`);
        assert.match(r.stdout, /AGENT-DONE/);
        assert.equal(readFileSync(join(cwd, 'hello.txt'), 'utf8').trim(), 'hello');
        assert.equal(w.stub.compactions - k0, 1, `one compaction: ${r.stderr.slice(-2000)}`);
        assert.ok(upstreamCalls(w) - c0 >= 3, 'tool call, compaction, the turn after it');

        // the session goes on in a new process: the next user turn carries the compacted history
        const n0 = w.stub.requests.length;
        const again = await run(join(BIN, 'codex'), ['exec', 'resume', '--last', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', 'Say it once more'], {
          cwd,
          env: { HOME: cwd, CODEX_HOME: home, CODEX_API_KEY: t },
        });
        assert.equal(again.code, 0, `codex resume exited ${again.code}: ${again.stdout}\n${again.stderr.slice(-3000)}`);
        assert.match(again.stdout, /AGENT-DONE/);
        const after = w.stub.requests.slice(n0).map((q) => JSON.stringify(q.body));
        assert.ok(after.some((b) => (model === 'gpt-4.1-mini' ? b.includes('oa-cmp:') : b.includes('Summary of the conversation so far'))), 'the compaction travels on');
        const took = Date.now() - t0;
        const calls = upstreamCalls(w) - c0;
        const { warm } = await settled(t, b0, calls);
        if (transport === 'websocket') assert.ok(opened() > s0, 'Codex used a WebSocket');
        else assert.equal(opened(), s0, 'no WebSocket');
        if (transport === 'http') assert.equal(warm.length, 0);
        process.stderr.write(`# codex 0.171.0 ${model} ${transport}: ${calls} upstream calls, ${warm.length} warm-ups, ${took} ms\n`);
      });
    }
  }
});
