// The MCP gateway (issue 36), black-box: two upstream MCP servers built with the official SDK
// (test/stubs/mcp-upstream.ts: one behind a static secret header, one behind OAuth client
// credentials) and a third that is slow; citygate's /v1/mcp reached with the SDK's own client.
// Shown: private URLs refused unless the operator allows them; bad input named; tools/list of
// both servers with their allow/deny lists, a call on each, charged and recorded (mode 'mcp');
// no token, another city's token and a revoked token refused; an upstream down or slow → a
// clean MCP error and the breaker of that server only; a 50-way race of priced calls exact to
// the credit; the upstreams' secrets in no answer, log or request log; spans and /metrics.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION, McpError } from '@modelcontextprotocol/sdk/types.js';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';
import { freshWindow } from '../helpers/rate-window.ts';
import { until } from '../helpers/wait.ts';
import { assertBooksBalance, cityWithUser, row, rows, unsettled } from '../money/setup.ts';
import { startMcpStub, type McpStub } from '../stubs/mcp-upstream.ts';

const SECRET = 'upstream-secret-9f8e7d6c5b4a';
const CLIENT_SECRET = 'oauth-client-secret-1a2b3c4d5e';
let gw: TestGateway;
let alpha: McpStub;
let beta: McpStub;
let slow: McpStub;
let admin: ReturnType<typeof client>;
let tokenA: string;
let tokenB: string;
const answers: string[] = []; // every text an MCP client got back, for the secrets check
const spans: { name: string; attributes: { key: string; value: { stringValue?: string; intValue?: string } }[]; status?: { code?: number } }[] = [];
const collector = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});

before(async () => {
  await new Promise<void>((ok) => collector.listen(0, '127.0.0.1', ok));
  [alpha, beta, slow] = await Promise.all([
    startMcpStub({
      name: 'alpha',
      secretHeader: ['x-upstream-key', SECRET],
      tools: [{ name: 'echo' }, { name: 'leaky', fails: `backend refused key ${SECRET}` }, { name: 'internal' }],
    }),
    startMcpStub({ name: 'beta', oauth: { clientId: 'citygate', clientSecret: CLIENT_SECRET }, tools: [{ name: 'search', answer: (a) => `results for ${a.text}` }, { name: 'hidden' }, { name: 'big', answer: () => 'x'.repeat(300_000) }] }),
    startMcpStub({ name: 'slow', tools: [{ name: 'wait' }] }),
  ]);
  slow.delayMs = 5000;
  gw = await startGateway({
    env: {
      REQUEST_LOG: 'full',
      AI_COOLDOWN_FAILURES: '2',
      AI_COOLDOWN_MS: '600000',
      USAGE_FLUSH_MS: '20',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
      OTEL_BSP_SCHEDULE_DELAY: '50',
    },
  });
  admin = client(gw.url, gw.adminKey);
  tokenA = await cityWithUser(admin, 'mcp-a', 'ann');
  tokenB = await cityWithUser(admin, 'mcp-b', 'bob');
});
after(async () => {
  await gw?.stop();
  await Promise.all([alpha?.close(), beta?.close(), slow?.close()]);
  collector.closeAllConnections();
  collector.close();
});

async function mcpClient(token?: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}/v1/mcp`), token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : {});
  const c = new Client({ name: 'test-agent', version: '1.0.0' });
  await c.connect(transport);
  return c;
}

/** An MCP error a call ends with (its code and citygate's data), kept for the secrets check. */
async function mcpErrorOf(p: Promise<unknown>): Promise<McpError> {
  try {
    const r = await p;
    answers.push(JSON.stringify(r));
  } catch (e) {
    assert.ok(e instanceof McpError, `an McpError, not ${String(e)}`);
    answers.push(e.message, JSON.stringify(e.data ?? null));
    return e;
  }
  throw new Error('the call succeeded');
}

const fund = (city: string, user: string, credits: number, key: string) => admin.post('/v1/balance/adjust', { city_id: city, user_id: user, credits, reason: 'mcp test', idempotency_key: key });
const balanceOf = async (token: string) => (await client(gw.url, token).get('/v1/balance/me')).body.credits as number;
/** Waits for the balance to read `credits` (charges reach the ledger within a flush interval). */
const balanceIs = (token: string, credits: number) => until(`balance ${credits}`, async () => (await balanceOf(token)) === credits, 10_000);
let ids: Record<string, string> = {};

describe('servers as data', () => {
  test('a private URL is refused unless the operator allows it; bad input is a 400 naming the field', async () => {
    const refused = await admin.post('/v1/mcp/servers/create', { city_id: 'mcp-a', name: 'alpha', url: alpha.url });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(errorOf(refused).code, 'url_refused');
    assert.equal(errorOf(refused).param, 'url');
    for (const [body, param] of [
      [{ city_id: 'mcp-a', name: 'has__underscores', url: 'https://example.com/mcp' }, 'name'],
      [{ city_id: 'mcp-a', name: 'x', url: 'ftp://example.com/mcp' }, 'url'],
      [{ city_id: 'mcp-a', name: 'x', url: 'https://example.com/mcp', price: -1 }, 'price'],
      [{ city_id: 'mcp-a', name: 'x', url: 'https://example.com/mcp', allowed_tools: ['a'], denied_tools: ['b'] }, 'denied_tools'],
      [{ city_id: 'mcp-a', name: 'x', url: 'https://example.com/mcp', auth: { type: 'headers', headers: { host: 'evil' } } }, 'auth.headers'],
      [{ city_id: 'mcp-a', name: 'x', url: 'https://example.com/mcp', timeout_ms: 5 }, 'timeout_ms'],
      [{ name: 'x', url: 'https://example.com/mcp' }, 'city_id'],
    ] as const) {
      const r = await admin.post('/v1/mcp/servers/create', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(errorOf(r).param, param, r.text);
    }
    assert.equal((await admin.post('/v1/env/upsert', { key: 'AI_FETCH_ALLOW_PRIVATE', value: 'true' })).status, 200);

    const a = await admin.post('/v1/mcp/servers/create', {
      city_id: 'mcp-a',
      name: 'alpha',
      url: alpha.url,
      auth: { type: 'headers', headers: { 'x-upstream-key': SECRET } },
      allowed_tools: ['echo', 'leaky'],
      price: 1000,
      prices: { leaky: 0 },
    });
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(a.body.auth, { type: 'headers', header_names: ['x-upstream-key'] });
    assert.ok(!a.text.includes(SECRET), 'the secret is never shown');
    const b = await admin.post('/v1/mcp/servers/create', {
      city_id: 'mcp-a',
      name: 'beta',
      url: beta.url,
      auth: { type: 'oauth', token_url: `${beta.origin}/token`, client_id: 'citygate', client_secret: CLIENT_SECRET },
      denied_tools: ['hidden'],
      price: 250,
    });
    assert.equal(b.status, 200, b.text);
    assert.ok(!b.text.includes(CLIENT_SECRET));
    const s = await admin.post('/v1/mcp/servers/create', { city_id: 'mcp-a', name: 'slow', url: slow.url, timeout_ms: 1500, price: 10 });
    assert.equal(s.status, 200, s.text);
    const dup = await admin.post('/v1/mcp/servers/create', { city_id: 'mcp-a', name: 'alpha', url: alpha.url });
    assert.equal(dup.status, 409, dup.text);
    ids = { alpha: a.body.server_id, beta: b.body.server_id, slow: s.body.server_id };

    // sealed at rest: the row holds no secret in clear
    const stored = await rows<{ auth: string | null }>(gw, 'SELECT auth FROM mcp_servers');
    for (const r of stored) assert.ok(!r.auth || (!r.auth.includes(SECRET) && !r.auth.includes(CLIENT_SECRET) && r.auth.startsWith('enc:v1:')), r.auth ?? '');
    // a bureau of another city sees none of them
    const listed = await admin.get('/v1/mcp/servers/list?city_id=mcp-a');
    assert.deepEqual(listed.body.items.map((i: { name: string }) => i.name), ['alpha', 'beta', 'slow']);
    assert.deepEqual((await admin.get('/v1/mcp/servers/list?city_id=mcp-b')).body.items, []);
  });

  test('servers/test connects, lists the tools and reports which are allowed and at what price', async () => {
    const r = await admin.post('/v1/mcp/servers/test', { server_id: ids.alpha });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.ok, true, r.text);
    assert.deepEqual(r.body.server_info, { name: 'alpha', version: '1.0.0' });
    assert.ok(r.body.protocol_version);
    assert.deepEqual(
      r.body.tools.map((t: { exposed_as: string; allowed: boolean; price: number }) => [t.exposed_as, t.allowed, t.price]),
      [['alpha__echo', true, 1000], ['alpha__leaky', true, 0], ['alpha__internal', false, 1000]],
    );
    const b = await admin.post('/v1/mcp/servers/test', { server_id: ids.beta });
    assert.equal(b.body.ok, true, b.text);
    assert.ok(beta.tokensIssued >= 1, 'citygate obtained an OAuth token with the client credentials');
    // a server that cannot be reached: a report, not an error
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((ok) => closed.close(ok)); // a port nothing listens on
    const dead = await admin.post('/v1/mcp/servers/create', { city_id: 'mcp-a', name: 'dead', url: `http://127.0.0.1:${port}/mcp` });
    const d = await admin.post('/v1/mcp/servers/test', { server_id: dead.body.server_id });
    assert.equal(d.status, 200, d.text);
    assert.deepEqual([d.body.ok, d.body.tools], [false, []]);
    assert.match(d.body.error, /ECONNREFUSED/, d.text);
    assert.equal((await admin.post('/v1/mcp/servers/remove', { server_id: dead.body.server_id })).body.removed, true);
    // a bureau manages its own city's servers only
    const bureau = client(gw.url, (await admin.post('/v1/bureaus/create', { city_id: 'mcp-b', name: 'backend' })).body.bureau_token);
    assert.deepEqual((await bureau.get('/v1/mcp/servers/list')).body.items, []);
    assert.equal((await bureau.post('/v1/mcp/servers/test', { server_id: ids.alpha })).status, 404);
    assert.equal((await bureau.post('/v1/mcp/servers/update', { server_id: ids.alpha, enabled: false })).status, 404);
    assert.equal((await bureau.post('/v1/mcp/servers/create', { city_id: 'mcp-a', name: 'x', url: 'https://example.com/mcp' })).status, 403);
    const own = await bureau.post('/v1/mcp/servers/create', { name: 'own', url: 'https://example.com/mcp', enabled: false });
    assert.equal(own.status, 200, own.text);
    assert.equal(own.body.city_id, 'mcp-b');
    assert.equal((await bureau.post('/v1/mcp/servers/remove', { server_id: own.body.server_id })).status, 200);
    const missing = await admin.post('/v1/mcp/servers/test', { server_id: 'mcp_nope' });
    assert.equal(missing.status, 404);
    assert.equal(errorOf(missing).param, 'server_id');
  });
});

describe('/v1/mcp', () => {
  test("the SDK client lists both servers' allowed tools and calls one on each: charged once, recorded as mcp usage, traced", async () => {
    assert.equal((await fund('mcp-a', 'ann', 10_000, 'ann-1')).status, 200);
    const c = await mcpClient(tokenA);
    const names = (await c.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['alpha__echo', 'alpha__leaky', 'beta__big', 'beta__search', 'slow__wait']);
    const echo = await c.callTool({ name: 'alpha__echo', arguments: { text: 'hi' } });
    assert.deepEqual(echo.content, [{ type: 'text', text: 'alpha:echo:hi' }]);
    const search = await c.callTool({ name: 'beta__search', arguments: { text: 'mcp' } });
    assert.deepEqual(search.content, [{ type: 'text', text: 'results for mcp' }]);
    answers.push(JSON.stringify(echo), JSON.stringify(search));
    // a tool outside the allow-list (or on the deny-list) is unknown, even called by name
    for (const name of ['alpha__internal', 'beta__hidden', 'nope__x', 'plain']) {
      const e = await mcpErrorOf(c.callTool({ name, arguments: {} }));
      assert.equal(e.code, -32602, name);
    }
    await c.close();
    await balanceIs(tokenA, 10_000 - 1000 - 250);
    await until('usage records', async () => (await rows(gw, `SELECT 1 FROM usage WHERE city_id = 'mcp-a' AND mode = 'mcp'`)).length >= 2);
    const usage = await rows<{ model: string; upstream: string; credits: number; status: string; duration_ms: number }>(gw, `SELECT model, upstream, credits, status, duration_ms FROM usage WHERE city_id = 'mcp-a' AND mode = 'mcp' ORDER BY seq`);
    assert.deepEqual(usage.map((u) => [u.model, u.upstream, Number(u.credits), u.status]), [['alpha__echo', 'alpha', 1000, 'ok'], ['beta__search', 'beta', 250, 'ok']]);
    // only the server's own credentials went upstream; the user's token never did
    for (const h of [...alpha.requests, ...beta.requests]) assert.ok(!JSON.stringify(h).includes(tokenA), 'the caller’s token is not forwarded');
    assert.ok(alpha.requests.every((h) => h['x-upstream-key'] === SECRET));
    assert.ok(beta.requests.every((h) => String(h.authorization).startsWith('Bearer tok_')));
    // one span per call, under the request's server span
    const span = await until('the tool span', () => spans.find((s) => s.name === 'execute_tool alpha__echo'));
    assert.equal(span!.attributes.find((a) => a.key === 'citygate.upstream')?.value.stringValue, 'mcp:alpha');
    assert.equal(span!.attributes.find((a) => a.key === 'citygate.credits')?.value.intValue, '1000');
  });

  test('OAuth client credentials: the token is obtained once and reused, and obtained again when the upstream refuses it', async () => {
    const c = await mcpClient(tokenA);
    const n0 = beta.tokensIssued;
    const seen = beta.requests.length;
    for (const text of ['one', 'two']) assert.deepEqual((await c.callTool({ name: 'beta__search', arguments: { text } })).content, [{ type: 'text', text: `results for ${text}` }]);
    assert.equal(beta.tokensIssued, n0, 'the token is reused');
    assert.equal(beta.requests.length - seen, 2, 'one upstream request per call (no stray notifications)');
    beta.revokeTokens();
    assert.deepEqual((await c.callTool({ name: 'beta__search', arguments: { text: 'three' } })).content, [{ type: 'text', text: 'results for three' }]);
    assert.equal(beta.tokensIssued, n0 + 1, 'a refused token is replaced once, and the call goes through');
    await c.close();
  });

  test("an upstream's answer past AI_FETCH_MAX_BYTES is cut off: a clean MCP error, not charged", async () => {
    const c = await mcpClient(tokenA);
    assert.equal(((await c.callTool({ name: 'beta__big', arguments: {} })).content as unknown[]).length, 1, 'under the cap it passes');
    assert.equal((await admin.post('/v1/env/upsert', { key: 'AI_FETCH_MAX_BYTES', value: '100000' })).status, 200);
    try {
      const e = await mcpErrorOf(c.callTool({ name: 'beta__big', arguments: {} }));
      assert.equal(e.code, -32052, e.message);
      assert.equal((e.data as { code: string }).code, 'upstream_too_large');
    } finally {
      await admin.post('/v1/env/remove', { key: 'AI_FETCH_MAX_BYTES' });
      await c.close();
    }
  });

  test("refused: no token, a bad token, another city's token, a revoked token, a revoked key", async () => {
    await assert.rejects(mcpClient(), (e) => e instanceof StreamableHTTPError && e.code === 401);
    await assert.rejects(mcpClient('not-a-token'), (e) => e instanceof StreamableHTTPError && e.code === 401);
    const raw = await fetch(`${gw.url}/v1/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    assert.equal(raw.status, 401);
    assert.match(raw.headers.get('www-authenticate') ?? '', /^Bearer/);
    assert.equal(errorOf({ status: 401, headers: raw.headers, body: await raw.json(), text: '' }).code, 'missing_credential');
    // city B has no servers: its user sees no tools and cannot reach city A's
    const b = await mcpClient(tokenB);
    assert.deepEqual((await b.listTools()).tools, []);
    const e = await mcpErrorOf(b.callTool({ name: 'alpha__echo', arguments: { text: 'x' } }));
    assert.equal(e.code, -32602);
    await b.close();
    // a revoked token
    const t = (await admin.post('/v1/cities/tokens/apply', { city_id: 'mcp-a', user_id: 'ann' })).body.user_token as string;
    const c = await mcpClient(t);
    assert.equal((await client(gw.url, t).post('/v1/accounts/logout', {})).status, 200);
    await assert.rejects(c.listTools(), (e) => e instanceof StreamableHTTPError && e.code === 401);
    // a user API key works as the Bearer (its usage record carries the key), until it is revoked
    const made = await client(gw.url, tokenA).post('/v1/accounts/keys/create', { name: 'agent' });
    assert.equal(made.status, 200, made.text);
    const k = await mcpClient(made.body.secret);
    assert.deepEqual((await k.callTool({ name: 'alpha__echo', arguments: { text: 'key' } })).content, [{ type: 'text', text: 'alpha:echo:key' }]);
    const keyed = await until('the key’s record', async () => (await rows<{ credits: number }>(gw, `SELECT credits FROM usage WHERE key_id = ? AND mode = 'mcp'`, [made.body.key.id]))[0]);
    assert.equal(Number(keyed.credits), 1000);
    assert.equal((await client(gw.url, tokenA).post('/v1/accounts/keys/revoke', { id: made.body.key.id })).status, 200);
    await assert.rejects(k.callTool({ name: 'alpha__echo', arguments: { text: 'key' } }), (e) => e instanceof StreamableHTTPError && e.code === 401);
    // GET (the server-initiated stream) is not offered
    const get = await fetch(`${gw.url}/v1/mcp`, { headers: { authorization: `Bearer ${tokenA}`, accept: 'text/event-stream' } });
    assert.equal(get.status, 405);
  });

  test('the protocol version is negotiated: the current revision, an older one a client asks for, the latest for an unknown one', async () => {
    const init = async (protocolVersion: string) => {
      const r = await fetch(`${gw.url}/v1/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokenB}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
      });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('mcp-session-id'), null, 'stateless: no session');
      const body = await r.json();
      return [body.result.protocolVersion, body.result.serverInfo.name, !!body.result.capabilities.tools];
    };
    assert.deepEqual(await init(LATEST_PROTOCOL_VERSION), [LATEST_PROTOCOL_VERSION, 'citygate', true]);
    assert.deepEqual(await init('2025-03-26'), ['2025-03-26', 'citygate', true]);
    assert.deepEqual(await init('1999-01-01'), [LATEST_PROTOCOL_VERSION, 'citygate', true]);
    // a request naming an unsupported version in its header is refused
    const bad = await fetch(`${gw.url}/v1/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokenB}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '1999-01-01' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    assert.equal(bad.status, 400);
  });

  test("the city's request limits apply to /v1/mcp (429 before anything is called)", async () => {
    const token = await cityWithUser(admin, 'mcp-limited', 'lee');
    assert.equal((await admin.post('/v1/cities/update', { city_id: 'mcp-limited', limits: { user_rpm: 3 } })).status, 200);
    await freshWindow(10_000); // the four requests in one one-minute window
    const c = await mcpClient(token); // initialize + initialized: 2 requests
    await c.listTools(); // the 3rd
    await assert.rejects(c.listTools(), (e) => e instanceof StreamableHTTPError && e.code === 429);
    await c.close().catch(() => {});
  });

  test('an upstream that is down or slow gives a clean MCP error, is not charged, and opens the breaker of that server only', async () => {
    await until('earlier charges written', async () => (await unsettled(gw, 'ann')) === 0, 20_000);
    const c = await mcpClient(tokenA);
    const before = await balanceOf(tokenA);
    const slowErr = await mcpErrorOf(c.callTool({ name: 'slow__wait', arguments: {} }));
    assert.equal(slowErr.code, -32054);
    assert.equal((slowErr.data as { code: string }).code, 'upstream_timeout');
    beta.failing = true;
    for (let i = 0; i < 2; i++) {
      const e = await mcpErrorOf(c.callTool({ name: 'beta__search', arguments: { text: 'x' } }));
      assert.equal(e.code, -32052, e.message);
      assert.match(e.message, /beta/);
    }
    const seen = beta.requests.length;
    const open = await mcpErrorOf(c.callTool({ name: 'beta__search', arguments: { text: 'x' } }));
    assert.equal(open.code, -32053);
    assert.equal((open.data as { code: string }).code, 'upstream_unavailable');
    assert.equal(beta.requests.length, seen, 'an open breaker does not call the upstream');
    // the other server is unaffected
    const ok = await c.callTool({ name: 'alpha__echo', arguments: { text: 'still' } });
    assert.deepEqual(ok.content, [{ type: 'text', text: 'alpha:echo:still' }]);
    // tools/list leaves the open server out instead of failing
    assert.ok(!(await c.listTools()).tools.some((t) => t.name.startsWith('beta__')));
    await c.close();
    beta.failing = false;
    await balanceIs(tokenA, before - 1000); // only the call that was answered is charged
    await until('charges written', async () => (await unsettled(gw, 'ann')) === 0, 20_000);
    assert.equal(await balanceOf(tokenA), before - 1000);
    const failed = await until('failed records', async () => {
      const r = await rows<{ error_code: string; credits: number }>(gw, `SELECT error_code, credits FROM usage WHERE city_id = 'mcp-a' AND mode = 'mcp' AND status = 'error' AND error_code LIKE 'upstream%' AND error_code <> 'upstream_too_large' ORDER BY seq`);
      return r.length >= 4 ? r : null;
    });
    assert.deepEqual(failed.map((r) => [r.error_code, Number(r.credits)]), [['upstream_timeout', 0], ['upstream_error', 0], ['upstream_error', 0], ['upstream_unavailable', 0]]);
  });

  test("the user's cap on calls in flight (shared with model calls) refuses the call over it with an MCP error, nothing called", async () => {
    assert.equal((await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_USER_AI_CALLS', value: '1' })).status, 200);
    alpha.delayMs = 1500; // the first call is still out when the second arrives, however loaded the machine
    const c = await mcpClient(tokenA);
    try {
      const before = alpha.calls.get('echo') ?? 0;
      const rs = await Promise.allSettled([1, 2].map((i) => c.callTool({ name: 'alpha__echo', arguments: { text: `cap ${i}` } })));
      assert.equal(rs.filter((r) => r.status === 'fulfilled').length, 1);
      const refused = rs.find((r): r is PromiseRejectedResult => r.status === 'rejected')!.reason;
      assert.ok(refused instanceof McpError, String(refused));
      assert.equal(refused.code, -32029);
      assert.equal((refused.data as { code: string }).code, 'rate_limited');
      assert.equal((alpha.calls.get('echo') ?? 0) - before, 1);
    } finally {
      alpha.delayMs = 0;
      await c.close();
      await admin.post('/v1/env/remove', { key: 'RATE_LIMIT_USER_AI_CALLS' });
    }
  });

  test('one process calls a server up to 64 times at once (slow tools do not queue behind 8 connections)', async () => {
    alpha.delayMs = 1500;
    alpha.maxInFlight = 0;
    const c = await mcpClient(tokenA);
    try {
      await Promise.all(Array.from({ length: 20 }, () => c.callTool({ name: 'alpha__leaky', arguments: {} }))); // price 0
      assert.ok(alpha.maxInFlight > 8, `at most ${alpha.maxInFlight} calls were in progress at once`);
    } finally {
      alpha.delayMs = 0;
      await c.close();
    }
  });

  test('a 50-way race of priced tool calls: exactly the credits there are, Σ charged = Σ usage credits', async () => {
    const token = await cityWithUser(admin, 'mcp-a', 'racer');
    assert.equal((await fund('mcp-a', 'racer', 10_000, 'racer-1')).status, 200);
    const before = alpha.calls.get('echo') ?? 0;
    const c = await mcpClient(token);
    const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => c.callTool({ name: 'alpha__echo', arguments: { text: `race ${i}` } })));
    await c.close();
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    for (const r of refused) {
      assert.ok(r.reason instanceof McpError, String(r.reason));
      assert.equal(r.reason.code, -32040, r.reason.message);
      assert.equal((r.reason.data as { code: string }).code, 'insufficient_credits');
    }
    assert.equal(ok, 10, `credits for 10 calls: ${ok} served`);
    assert.equal((alpha.calls.get('echo') ?? 0) - before, ok, 'the upstream saw exactly the calls that were paid for');
    await until('charges written', async () => (await unsettled(gw, 'racer')) === 0, 20_000);
    const usage = () => row<{ n: number; c: number }>(gw, `SELECT COUNT(*) AS n, COALESCE(SUM(credits), 0) AS c FROM usage WHERE city_id = 'mcp-a' AND user_id = 'racer'`);
    await until('usage records', async () => Number((await usage()).n) === 50, 20_000);
    const b = (await assertBooksBalance(gw)).get('mcp-a/racer')!;
    assert.equal(b.balance, 0);
    assert.equal(Number((await usage()).c), 10_000, 'Σ usage credits = Σ charged');
    assert.equal(await balanceOf(token), 0);
  });

  test("the upstreams' secrets appear in no answer, log or request log; /metrics counts the calls", async () => {
    const c = await mcpClient(tokenA);
    // a tool's error result (isError) and a JSON-RPC error of the upstream both come back scrubbed
    const leaky = await c.callTool({ name: 'alpha__leaky', arguments: {} });
    answers.push(JSON.stringify(leaky));
    assert.equal(leaky.isError, true);
    assert.match(JSON.stringify(leaky.content), /backend refused key \[redacted\]/);
    await c.close();
    const secrets = [SECRET, CLIENT_SECRET];
    for (const a of answers) for (const s of secrets) assert.ok(!a.includes(s), `an answer carries a secret: ${a}`);
    for (const s of secrets) {
      assert.ok(!gw.stdout().includes(s), 'stdout');
      assert.ok(!gw.stderr().includes(s), 'stderr');
    }
    const logged = await until('request logs', async () => {
      const r = await rows<{ request_id: string }>(gw, `SELECT request_id FROM request_logs WHERE route = '/v1/mcp'`);
      return r.length >= 10 ? r : null;
    });
    for (const { request_id } of logged) {
      const r = await admin.get(`/v1/usage/request-log?request_id=${request_id}`);
      assert.equal(r.status, 200, r.text);
      for (const s of [...secrets, tokenA]) assert.ok(!r.text.includes(s), `request log ${request_id} carries a secret`);
    }
    const m = await client(gw.url, gw.adminKey).get('/metrics');
    assert.equal(m.status, 200);
    assert.match(m.text, /citygate_mcp_tool_calls_total\{city="mcp-a",server="alpha",tool="echo",outcome="ok"\} \d+/);
    assert.match(m.text, /citygate_mcp_tool_calls_total\{city="mcp-a",server="beta",tool="search",outcome="upstream_error"\} 2/);
  });
});
