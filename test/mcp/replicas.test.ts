// /v1/mcp is stateless, so any process answers any request: two gateways on one database (two
// processes on one SQLite file, or two replicas on one PostgreSQL), a client that initializes
// on one and calls on the other, and a race of priced tool calls spread over both for a user
// whose credits cover exactly 10: exactly 10 reach the upstream, the books are exact.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startGateways, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { assertBooksBalance, cityWithUser, row, unsettled } from '../money/setup.ts';
import { startMcpStub, type McpStub } from '../stubs/mcp-upstream.ts';

let a: TestGateway;
let b: TestGateway;
let up: McpStub;

before(async () => {
  up = await startMcpStub({ name: 'up', tools: [{ name: 'echo' }] });
  [a, b] = await startGateways(2, { dir: tempDir(), env: { AI_FETCH_ALLOW_PRIVATE: 'true', USAGE_FLUSH_MS: '20' } });
});
after(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await up?.close();
});

const connect = async (gw: TestGateway, token: string) => {
  const c = new Client({ name: 'replicas', version: '1' });
  await c.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return c;
};

test('initialize on one process, call on the other; a race over both is charged exactly', async () => {
  const admin = client(a.url, a.adminKey);
  const token = await cityWithUser(admin, 'mcp-r', 'rae');
  assert.equal((await admin.post('/v1/balance/adjust', { city_id: 'mcp-r', user_id: 'rae', credits: 10_000, reason: 'race', idempotency_key: 'rae' })).status, 200);
  const s = await admin.post('/v1/mcp/servers/create', { city_id: 'mcp-r', name: 'up', url: up.url, price: 1000 });
  assert.equal(s.status, 200, s.text);

  // a session-less exchange split across the two processes: initialize on A, tools/list on B
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await fetch(`${a.url}/v1/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }) });
  assert.equal(init.status, 200);
  const list = await fetch(`${b.url}/v1/mcp`, { method: 'POST', headers: { ...headers, 'mcp-protocol-version': '2025-11-25' }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
  assert.equal(list.status, 200);
  assert.deepEqual((await list.json()).result.tools.map((t: { name: string }) => t.name), ['up__echo']);

  const [ca, cb] = await Promise.all([connect(a, token), connect(b, token)]);
  const rs = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => (i % 2 ? cb : ca).callTool({ name: 'up__echo', arguments: { text: `r${i}` } })));
  await Promise.all([ca.close(), cb.close()]);
  const ok = rs.filter((r) => r.status === 'fulfilled').length;
  for (const r of rs) if (r.status === 'rejected') assert.ok(r.reason instanceof McpError && r.reason.code === -32040, String(r.reason));
  assert.equal(ok, 10);
  assert.equal(up.calls.get('echo'), 10, 'the upstream saw exactly the paid calls');
  await until('charges written', async () => (await unsettled(a, 'rae')) === 0, 20_000);
  const usage = () => row<{ n: number; c: number }>(a, `SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS c FROM usage WHERE city_id = 'mcp-r' AND mode = 'mcp'`);
  await until('usage records', async () => Number((await usage()).n) === 50, 20_000);
  assert.equal(Number((await usage()).c), 10_000);
  assert.equal((await assertBooksBalance(a)).get('mcp-r/rae')!.balance, 0);
});
