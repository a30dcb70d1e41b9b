// Records the replay fixtures of the newer clients (test/ai/fixtures/, replayed by
// test/ai/agent-replay.test.ts in `npm test`): run by hand after pinning a new client version,
//   node test/agents/capture-fixtures.ts
// - Codex (test/agents/clients/) on its built-in OpenAI provider, over WebSocket, in a session
//   that compacts: every event it sends on the socket, recorded by a relay between Codex and
//   citygate (the warm-up, the turns continued with previous_response_id, the compaction
//   trigger and the turn after it);
// - Claude Code (test/agents/claude-latest/) forwarded: the Messages requests as the upstream
//   got them (what Claude Code sent, model id aside).
// Machine paths and ids are replaced, as in the older fixtures.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import WebSocket, { WebSocketServer } from 'ws';
import { startAgentsWorld } from '../ai/agents-world.ts';
import { claudeEnv, installClients, removeWorkdirs, ROOT, run, workdir } from './harness.ts';

const OUT = join(ROOT, 'test/ai/fixtures');
const versionOf = (set: string, pkg: string) => JSON.parse(readFileSync(join(ROOT, 'test/agents', set, 'package.json'), 'utf8')).dependencies[pkg] as string;

/** A relay on its own port: WebSocket upgrades to citygate's socket (each client event recorded), other requests passed through. */
async function relay(target: string, events: any[]) {
  const wss = new WebSocketServer({ noServer: true });
  const server = createServer(async (req, res) => {
    const body = await new Promise<Buffer>((r) => {
      const parts: Buffer[] = [];
      req.on('data', (c) => parts.push(c)).on('end', () => r(Buffer.concat(parts)));
    });
    const up = await fetch(target + req.url, { method: req.method, headers: req.headers as Record<string, string>, body: body.length ? new Uint8Array(body) : undefined });
    res.writeHead(up.status, Object.fromEntries(up.headers));
    res.end(Buffer.from(await up.arrayBuffer()));
  });
  server.on('upgrade', (req: IncomingMessage, socket, head) => {
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !/^(host|connection|upgrade|sec-websocket-.*)$/i.test(k))) as Record<string, string>;
    const upstream = new WebSocket(target.replace(/^http/, 'ws') + req.url, { headers });
    upstream.once('unexpected-response', () => socket.destroy());
    upstream.once('open', () =>
      wss.handleUpgrade(req, socket, head, (client) => {
        client.on('message', (d) => {
          events.push({ headers: { 'user-agent': req.headers['user-agent'] ?? '', 'openai-beta': req.headers['openai-beta'] ?? '' }, event: JSON.parse(String(d)) });
          upstream.send(String(d));
        });
        upstream.on('message', (d) => client.send(String(d)));
        client.on('close', () => upstream.close());
        upstream.on('close', () => client.close());
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
}

function scrub(x: unknown, cwd: string): unknown {
  return JSON.parse(
    JSON.stringify(x)
      .split(cwd)
      .join('/home/user/project')
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '00000000-0000-0000-0000-000000000000'),
  );
}

const w = await startAgentsWorld();
try {
  // Codex over WebSocket, translated, compacting once
  const codex = versionOf('clients', '@openai/codex');
  const { bin } = installClients('clients', ['codex']);
  w.stub.plan = (tools) => (tools.includes('exec_command') ? { name: 'exec_command', args: { cmd: 'echo hello > hello.txt' } } : null);
  const events: any[] = [];
  const r = await relay(w.gw.url, events);
  const cwd = workdir();
  const home = join(cwd, '.codex');
  mkdirSync(home);
  writeFileSync(join(home, 'config.toml'), `model = "gpt-4o-mini"\nopenai_base_url = "${r.url}/v1"\nmodel_auto_compact_token_limit = 1000\n`);
  const t = await w.user('capture-codex');
  const out = await run(join(bin, 'codex'), ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', 'Write hello to hello.txt'], { cwd, env: { HOME: cwd, CODEX_HOME: home, CODEX_API_KEY: t } });
  r.close();
  if (out.code !== 0) throw new Error(`codex exited ${out.code}: ${out.stderr}`);
  writeFileSync(
    join(OUT, `codex-${codex}-websocket-compaction.json`),
    `${JSON.stringify({ client: 'codex', version: codex, note: 'The events Codex sent on one WebSocket (built-in OpenAI provider, model_auto_compact_token_limit = 1000) to citygate in front of a scripted upstream, translated: the generate:false warm-up, the tool-call turn, the turn continued with previous_response_id, the compaction trigger, the turn after it. Machine paths and ids replaced; the compaction item is the capturing gateway\'s (a replay swaps in its own).', messages: scrub(events, cwd) }, null, 1)}\n`,
  );

  // Claude Code, newest, forwarded: the two requests of a one-tool-call task
  const claude = versionOf('claude-latest', '@anthropic-ai/claude-code');
  const c = installClients('claude-latest', ['claude']);
  w.stub.plan = (tools) => (tools.includes('Write') ? { name: 'Write', args: { file_path: join(cwd, 'hello2.txt'), content: 'hello' } } : null);
  const n0 = w.stub.requests.length;
  const t2 = await w.user('capture-claude');
  const o2 = await run(join(c.bin, 'claude'), ['-p', 'Write hello to hello2.txt', '--model', 'fwd-sonnet', '--dangerously-skip-permissions'], {
    cwd,
    env: claudeEnv(cwd, w.gw.url, { ANTHROPIC_AUTH_TOKEN: t2 }),
  });
  if (o2.code !== 0) throw new Error(`claude exited ${o2.code}: ${o2.stderr}`);
  const keep = ['anthropic-beta', 'anthropic-version', 'content-type', 'user-agent', 'x-app'];
  const requests = w.stub.requests
    .slice(n0)
    .filter((q) => q.path === '/v1/messages' && Array.isArray(q.body?.tools) && q.body.tools.length > 0)
    .map((q) => ({ path: q.path, headers: Object.fromEntries(keep.filter((k) => q.headers[k]).map((k) => [k, String(q.headers[k])])), body: q.body }));
  writeFileSync(
    join(OUT, `claude-code-${claude}-claude-model.json`),
    `${JSON.stringify({ client: 'claude-code', version: claude, note: 'Request bodies as the client sent them (model fwd-sonnet, forwarded to a scripted Anthropic upstream; turn 1: tool call asked; turn 2: after the tool result). Machine paths and ids replaced.', requests: scrub(requests, cwd) }, null, 1)}\n`,
  );
  console.log(`codex ${codex}: ${events.length} socket events; claude-code ${claude}: ${requests.length} requests`);
} finally {
  await w.close();
  removeWorkdirs();
}
