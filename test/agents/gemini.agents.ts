// npm run test:agents, Google's clients: Gemini CLI (pinned in test/agents/gemini/, installed into
// .agents-cache/gemini/) and the @google/genai SDK (the project's dev dependency) against citygate's
// Gemini API, forwarded to a Google upstream (the Gemini stub, scripted) and translated for an
// OpenAI-compatible one (the agent stub): each run asks for a tool call, runs it (the file is
// written), gets the final answer, and is charged exactly (one usage record per model call,
// Σ usage credits = the balance drop).
//
// The clients talk to citygate through a recording proxy (recorder.ts); with
// CAPTURE_FIXTURES=1 the requests they sent are written to test/ai/fixtures/ (machine paths
// replaced), the bodies npm test replays (test/ai/agent-replay.test.ts).
import { FunctionCallingConfigMode, GoogleGenAI, type Content } from '@google/genai';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startAgentsWorld, upstreamCalls, type AgentsWorld } from '../ai/agents-world.ts';
import { installClients, removeWorkdirs, ROOT, run, workdir } from './harness.ts';
import { startRecorder, type Recorded } from './recorder.ts';

const CLI_VERSION = JSON.parse(readFileSync(new URL('./gemini/package.json', import.meta.url), 'utf8')).dependencies['@google/gemini-cli'] as string;
const SDK_VERSION = JSON.parse(readFileSync(join(ROOT, 'node_modules/@google/genai/package.json'), 'utf8')).version as string;
const CAPTURE = process.env.CAPTURE_FIXTURES === '1';

let w: AgentsWorld;
let rec: Awaited<ReturnType<typeof startRecorder>>;
let BIN = '';
/** The working directory of the run in progress (write_file takes an absolute path). */
let current = '';

before(async () => {
  ({ bin: BIN } = installClients('gemini', ['gemini']));
  w = await startAgentsWorld();
  rec = await startRecorder(w.gw.url);
  const plan = (tools: string[]) => {
    if (tools.includes('write_file')) return { name: 'write_file', args: { file_path: join(current, 'hello.txt'), content: 'hello' } };
    if (tools.includes('get_weather')) return { name: 'get_weather', args: { city: 'Paris' } };
    return null;
  };
  w.stub.plan = plan;
  w.gemini.plan = plan;
});
after(async () => {
  await rec?.close();
  await w?.close();
  removeWorkdirs();
});

const toolCalls = () => w.stub.toolCalls + w.gemini.toolCalls;

async function charged(t: string, fn: () => Promise<void>) {
  const b0 = await w.balance(t);
  const c0 = upstreamCalls(w);
  const tools0 = toolCalls();
  await fn();
  assert.ok(toolCalls() > tools0, 'the upstream asked for a tool call');
  return w.settled(t, b0, c0);
}

/** The requests recorded since `from`, as a fixture: paths under the client's base URL, machine paths replaced. */
function fixture(client: string, version: string, from: number, cwd: string | null, note: string) {
  const reqs = rec.requests.slice(from).filter((r: Recorded) => r.method === 'POST' && /:(stream)?[gG]enerateContent/.test(r.path));
  let text = JSON.stringify(reqs.map((r) => ({ path: r.path.replace(/^\/v1\/ai/, ''), headers: r.headers, body: r.body })));
  if (cwd) text = text.split(cwd).join('/home/user/project').split(basename(cwd)).join('project');
  return { client, version, note, requests: JSON.parse(text) };
}
function save(name: string, f: object) {
  if (!CAPTURE) return;
  writeFileSync(join(ROOT, 'test/ai/fixtures', name), JSON.stringify(f, null, 1) + '\n');
}

describe(`Gemini CLI ${CLI_VERSION}`, () => {
  for (const [label, model, file] of [
    ['forwarded to a Google upstream', 'gemini-2.5-flash', 'google-model'],
    ['translated for an OpenAI-compatible upstream', 'gpt-4o-mini', 'other-model'],
  ] as const) {
    test(`-p on ${label} (${model}): writes the file, prints the answer, charged exactly`, async () => {
      const t = await w.user(`gemini-cli-${model}`);
      const cwd = (current = workdir());
      // What a user sets for an unattended run: the key's auth type, no telemetry, no update checks.
      mkdirSync(join(cwd, '.gemini'));
      writeFileSync(
        join(cwd, '.gemini/settings.json'),
        JSON.stringify({
          security: { auth: { selectedType: 'gemini-api-key' } },
          general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false },
        }),
      );
      const from = rec.requests.length;
      const started = performance.now();
      await charged(t, async () => {
        const r = await run(join(BIN, 'gemini'), ['-p', 'Write hello to hello.txt', '-m', model, '--yolo'], {
          cwd,
          env: { HOME: cwd, GEMINI_CLI_TRUST_WORKSPACE: 'true', GOOGLE_GEMINI_BASE_URL: `${rec.url}/v1/ai`, GEMINI_API_KEY: t },
        });
        assert.equal(r.code, 0, `gemini exited ${r.code}: ${r.stdout}\n${r.stderr}`);
        assert.match(r.stdout, /AGENT-DONE/);
        assert.equal(readFileSync(join(cwd, 'hello.txt'), 'utf8'), 'hello');
      });
      const calls = rec.requests.slice(from).filter((r) => r.method === 'POST');
      assert.ok(calls.length >= 2, 'a turn for the tool call, one after it');
      for (const c of calls) assert.match(c.path, new RegExp(`^/v1/ai/v1beta/models/${model}:`), 'v1beta under {base}/v1/ai');
      console.log(`gemini-cli ${CLI_VERSION} ${model}: ${Math.round(performance.now() - started)} ms`);
      save(`gemini-cli-${CLI_VERSION}-${file}.json`, fixture('gemini-cli', CLI_VERSION, from, cwd, `Request bodies as Gemini CLI sent them (-p, --yolo) to citygate's Gemini API (turn 1: tool call asked; turn 2: after the tool result); on ${label}. Machine paths replaced.`));
    });
  }
});

describe(`@google/genai ${SDK_VERSION}`, () => {
  const weather = { functionDeclarations: [{ name: 'get_weather', description: 'the weather of a city', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }] };
  for (const [label, model] of [
    ['forwarded', 'gemini-2.5-flash'],
    ['translated', 'gpt-4o-mini'],
  ] as const) {
    test(`a function-calling loop on the SDK's default API version, plain then streamed, ${label} (${model}), charged exactly`, async () => {
      const t = await w.user(`genai-${label}`);
      const ai = new GoogleGenAI({ apiKey: t, httpOptions: { baseUrl: `${rec.url}/v1/ai` } });
      const from = rec.requests.length;
      await charged(t, async () => {
        for (const stream of [false, true]) {
          const contents: Content[] = [{ role: 'user', parts: [{ text: 'What is the weather in Paris?' }] }];
          const config = { systemInstruction: 'Use the tools.', tools: [weather], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } } };
          for (let turn = 0; turn < 3; turn++) {
            let parts: any[] = [];
            if (stream) for await (const c of await ai.models.generateContentStream({ model, contents, config })) parts.push(...(c.candidates?.[0]?.content?.parts ?? []));
            else parts = (await ai.models.generateContent({ model, contents, config })).candidates?.[0]?.content?.parts ?? [];
            const call = parts.find((p) => p.functionCall)?.functionCall;
            if (!call) {
              assert.equal(parts.map((p) => p.text ?? '').join(''), 'AGENT-DONE');
              break;
            }
            assert.deepEqual([call.name, call.args], ['get_weather', { city: 'Paris' }]);
            contents.push({ role: 'model', parts }, { role: 'user', parts: [{ functionResponse: { id: call.id, name: call.name, response: { output: 'sunny in Paris' } } }] });
            assert.ok(turn < 2, 'the loop ends');
          }
        }
      });
      for (const c of rec.requests.slice(from)) assert.match(c.path, new RegExp(`^/v1/ai/v1/models/${model}:`), 'the SDK’s default v1 under {base}/v1/ai');
      if (label === 'translated') save(`google-genai-${SDK_VERSION}.json`, fixture('@google/genai', SDK_VERSION, from, null, "Request bodies as @google/genai sent them on its default API version (v1): a function-calling loop, plain (turns 1-2) then streamed (turns 3-4)."));
    });
  }
});
