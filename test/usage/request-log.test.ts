// Request logs (REQUEST_LOG=off|metadata|full, a city's request_log over it): what is kept of
// an AI call and what never is. Off stores nothing; metadata keeps headers, sizes and timings;
// full keeps the bodies too, a stream as its assembled answer, each body capped. No key or
// token is ever stored: the upstream key, the caller's token, the admin key, a cookie, an
// sk-… key pasted into a message. Read back by the admin and the city's bureau only; expired
// logs go with their blobs. SQLite here; PostgreSQL through CITYGATE_TEST_DATABASE_URL.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { createAdminClient } from '../../src/client/index.ts';
import { call } from '../helpers/http.ts';
import { sqlAll } from '../helpers/sql.ts';
import { until } from '../helpers/wait.ts';
import { startAiWorld, tokenFor, type AiWorld } from '../ai/setup.ts';

const UPSTREAM_KEY = 'upstream-key-4e3d2c1b0a998877';
const PASTED = 'sk-proj-UserPasted0123456789abcdefXYZ';
const COOKIE = 'session=cookie-value-5566778899aabb';
let w: AiWorld;
let carol: string;
let bureauA: string;
let bureauB: string;

before(async () => {
  w = await startAiWorld({ stub: { apiKey: UPSTREAM_KEY }, env: { TEXTPROVIDER_API_KEY: UPSTREAM_KEY, USAGE_FLUSH_MS: '20' } });
  carol = await tokenFor(w.admin, 'city-c', 'carol');
  bureauA = (await w.admin.post('/v1/bureaus/create', { city_id: 'city-a', name: 'a' })).body.bureau_token;
  bureauB = (await w.admin.post('/v1/bureaus/create', { city_id: 'city-b', name: 'b' })).body.bureau_token;
  assert.ok(bureauA && bureauB);
});
after(() => w?.close());

const filesDir = () => join(dirname(w.gw.dbPath), 'files', 'request-logs');
function blobFiles(): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    if (!existsSync(d)) return;
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk(filesDir());
  return out;
}
const rows = () => sqlAll<Record<string, any>>(w.gw, 'SELECT * FROM request_logs ORDER BY created_at');
const rowOf = async (requestId: string) => (await sqlAll<Record<string, any>>(w.gw, 'SELECT * FROM request_logs WHERE request_id = ?', [requestId]))[0];
const logged = (requestId: string) => until(`the request log of ${requestId}`, () => rowOf(requestId));
const readLog = (q: string, token = w.gw.adminKey) => call(w.gw.url, 'GET', `/v1/usage/request-log?${q}`, { token });

/** Every byte a request log left behind: its rows and its blobs. */
async function everythingStored(): Promise<string> {
  return JSON.stringify(await rows()) + blobFiles().map((f) => readFileSync(f, 'utf8')).join('\n');
}
function assertNoSecret(text: string) {
  for (const s of [UPSTREAM_KEY, PASTED, w.alice, w.bob, carol, w.gw.adminKey, bureauA, 'cookie-value-5566778899aabb']) {
    assert.ok(!text.includes(s), `${s.slice(0, 14)}… was stored`);
  }
}

const said = `my key is ${PASTED} please`;
const CALLS: [string, string, unknown, Record<string, string>?][] = [
  ['chat/completions JSON', '/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: said }] }],
  ['chat/completions stream', '/v1/ai/chat/completions', { model: 'stub-model', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: said }] }],
  ['text (AI SDK)', '/v1/ai/text', { model: 'stub-model', prompt: said }],
  ['stream (UI message stream)', '/v1/ai/stream', { model: 'stub-model', messages: [{ role: 'user', parts: [{ type: 'text', text: said }] }] }],
  ['Responses stream', '/v1/ai/responses', { model: 'stub-model', stream: true, input: said }],
  ['Messages stream (x-api-key)', '/v1/ai/messages', { model: 'stub-model', max_tokens: 50, stream: true, messages: [{ role: 'user', content: said }] }, { 'x-api-key': '' }],
];

async function make(token: string, path: string, body: unknown, extra: Record<string, string> = {}) {
  const headers: Record<string, string> = { cookie: COOKIE, ...extra };
  const viaApiKey = 'x-api-key' in extra;
  if (viaApiKey) headers['x-api-key'] = token;
  const r = await call(w.gw.url, 'POST', path, { token: viaApiKey ? undefined : token, body, headers });
  assert.equal(r.status, 200, r.text);
  return { res: r, requestId: r.headers.get('x-request-id')! };
}

/** REQUEST_LOG=full for every city without its own setting. */
const logAllInFull = async () => assert.equal((await w.admin.post('/v1/env/upsert', { key: 'REQUEST_LOG', value: 'full' })).status, 200);

test('off (the default): an AI call stores no log, and reading one answers 404', async () => {
  const { requestId } = await make(w.alice, '/v1/ai/chat/completions', CALLS[0][2]);
  await new Promise((r) => setTimeout(r, 600));
  assert.equal((await rows()).length, 0);
  assert.deepEqual(blobFiles(), []);
  const r = await readLog(`request_id=${requestId}`);
  assert.equal(r.status, 404);
  assert.equal(r.body.error.code, 'request_log_not_found');
});

test('full: every API, JSON and stream, keeps the request and the assembled answer, and never a key or a token', async () => {
  await logAllInFull();
  const answers: Record<string, any> = {};
  for (const [name, path, body, extra] of CALLS) {
    const { requestId } = await make(w.alice, path, body, extra);
    await logged(requestId);
    const r = await readLog(`request_id=${requestId}`);
    assert.equal(r.status, 200, `${name}: ${r.text}`);
    const log = r.body;
    assert.equal(log.mode, 'full', name);
    assert.equal(log.bodies, 'stored', name);
    assert.equal(log.route, path, name);
    assert.equal(log.status, 200, name);
    assert.equal(log.city_id, 'city-a');
    assert.equal(log.user_id, 'alice');
    assert.equal(log.model, 'stub-model', name);
    assert.ok(log.usage_id, `${name}: linked to its usage record`);
    assert.equal(log.request.headers.cookie, '[redacted]');
    if (extra) assert.equal(log.request.headers['x-api-key'], '[redacted]');
    else assert.equal(log.request.headers.authorization, '[redacted]');
    assert.match(JSON.stringify(log.request.body), /my key is \[redacted\] please/, name);
    assert.ok(log.timings.end_ms >= log.timings.head_ms, name);
    answers[name] = log.response;
  }
  // streams are stored as the answer a client assembles, not as events
  const text = 'Hello from stub: my key is [redacted] please';
  assert.equal(answers['chat/completions JSON'].body.choices[0].message.content, text);
  const chat = answers['chat/completions stream'];
  assert.equal(chat.stream, true);
  assert.equal(chat.assembled, true);
  assert.ok(chat.events > 3);
  assert.equal(chat.body.object, 'chat.completion');
  assert.equal(chat.body.choices[0].message.content, text);
  assert.equal(chat.body.choices[0].finish_reason, 'stop');
  assert.ok(chat.body.usage.completion_tokens > 0);
  assert.equal(answers['text (AI SDK)'].body.parts[0].text, text);
  assert.equal(answers['stream (UI message stream)'].body.parts.find((p: any) => p.type === 'text').text, text);
  const resp = answers['Responses stream'].body;
  assert.equal(resp.status, 'completed');
  assert.match(JSON.stringify(resp.output), /Hello from stub: my key is \[redacted\] please/);
  const msg = answers['Messages stream (x-api-key)'].body;
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.content[0].text, text);
  assert.equal(msg.stop_reason, 'end_turn');
  for (const a of Object.values(answers)) assert.doesNotMatch(JSON.stringify(a.body), /^"?data:/);

  // the admin's own calls (no city: REQUEST_LOG applies), JSON and stream
  for (const [, path, body] of CALLS.slice(0, 2)) {
    const { requestId } = await make(w.gw.adminKey, path, body);
    const row = await logged(requestId);
    assert.equal(row.identity, 'admin');
    assert.equal(row.city_id, null);
    assert.equal(row.mode, 'full');
  }
  assertNoSecret(await everythingStored());
});

test('metadata (a city setting over the env): headers, sizes, timings and status; no bodies, no blob, no secret', async () => {
  const u = await w.admin.post('/v1/cities/update', { city_id: 'city-b', request_log: 'metadata' });
  assert.equal(u.status, 200, u.text);
  assert.equal(u.body.request_log, 'metadata');
  for (const [name, path, body, extra] of CALLS) {
    const { requestId } = await make(w.bob, path, body, extra);
    const row = await logged(requestId);
    assert.equal(row.mode, 'metadata', name);
    assert.equal(row.blob_key, null, name);
    const log = (await readLog(`request_id=${requestId}`)).body;
    assert.equal(log.bodies, 'none');
    assert.equal(log.request.body, undefined);
    assert.equal(log.response.body, undefined);
    assert.ok(log.request.bytes > 0 && log.response.bytes > 0, name);
    assert.equal(log.response.status, 200);
    assert.match(log.response.headers['content-type'], /json|event-stream/);
  }
  assertNoSecret(await everythingStored());
});

test("a city's request_log beats the env: 'off' stores nothing while REQUEST_LOG=full; null goes back to the env", async () => {
  await logAllInFull();
  assert.equal((await w.admin.post('/v1/cities/update', { city_id: 'city-c', request_log: 'off' })).status, 200);
  const before = (await rows()).length;
  const files = blobFiles().length;
  const { requestId } = await make(carol, '/v1/ai/chat/completions', CALLS[1][2]);
  await new Promise((r) => setTimeout(r, 600));
  assert.equal((await rows()).length, before);
  assert.equal(blobFiles().length, files);
  assert.equal((await readLog(`request_id=${requestId}`)).status, 404);

  const back = await w.admin.post('/v1/cities/update', { city_id: 'city-c', request_log: null });
  assert.equal(back.body.request_log, null);
  const again = await make(carol, '/v1/ai/chat/completions', CALLS[1][2]);
  assert.equal((await logged(again.requestId)).mode, 'full');
});

test('bad settings are a 400 that changes nothing', async () => {
  const r = await w.admin.post('/v1/cities/update', { city_id: 'city-c', request_log: 'everything' });
  assert.equal(r.status, 400);
  assert.equal((await w.admin.get('/v1/cities/get?city_id=city-c')).body.request_log, null);
});

test('a refused call is logged too: its status, its error and what was sent', async () => {
  await logAllInFull();
  const r = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'stub-model', messages: 'not a list', api_key: 'my-own-secret-value-123' } });
  assert.equal(r.status, 400);
  const requestId = r.headers.get('x-request-id')!;
  const row = await logged(requestId);
  assert.equal(row.status, 400);
  const log = (await readLog(`request_id=${requestId}`)).body;
  assert.equal(log.error.code, 'invalid_input');
  assert.equal(log.response.body.error.code, 'invalid_input');
  assert.equal(log.request.body.api_key, '[redacted]', 'a field named like a credential is replaced whole');
  assert.ok(!(await everythingStored()).includes('my-own-secret-value-123'));
  // an API with its own error shape: the log keeps the error as its caller saw it
  const m = await call(w.gw.url, 'POST', '/v1/ai/messages', { token: w.alice, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
  assert.equal(m.status, 400);
  assert.equal(m.body.type, 'error');
  const mlog = (await readLog(`request_id=${(await logged(m.headers.get('x-request-id')!)).request_id}`)).body;
  assert.deepEqual(mlog.response.body, m.body);
  assert.match(mlog.response.headers['content-type'], /json/);
});

test('a query parameter named like a credential is stored [redacted], whatever its value looks like', async () => {
  assert.equal((await w.admin.post('/v1/env/upsert', { key: 'REQUEST_LOG', value: 'metadata' })).status, 200);
  const r = await call(w.gw.url, 'POST', '/v1/ai/chat/completions?key=plainvalue12345678&access_token=tok-9876543210&x=1&bad=%E0%A4%A', { token: w.alice, body: CALLS[0][2] });
  assert.equal(r.status, 200, r.text);
  const requestId = r.headers.get('x-request-id')!;
  await logged(requestId);
  const log = (await readLog(`request_id=${requestId}`)).body;
  assert.equal(log.request.path, '/v1/ai/chat/completions?key=[redacted]&access_token=[redacted]&x=1&bad=%E0%A4%A');
  const stored = await everythingStored();
  assert.ok(!stored.includes('plainvalue12345678') && !stored.includes('tok-9876543210'));
});

test('a stream the client cuts short keeps what had been sent, and says it was aborted', async () => {
  await logAllInFull();
  const ac = new AbortController();
  const res = await fetch(`${w.gw.url}/v1/ai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'stub-stream-slow', stream: true, messages: [{ role: 'user', content: 'count' }] }),
    signal: ac.signal,
  });
  const requestId = res.headers.get('x-request-id')!;
  const reader = res.body!.getReader();
  let seen = '';
  while (!seen.includes('w3')) seen += new TextDecoder().decode((await reader.read()).value);
  ac.abort();
  await logged(requestId);
  const log = (await readLog(`request_id=${requestId}`)).body;
  assert.equal(log.response.ended, 'aborted');
  const content: string = log.response.body.choices[0].message.content;
  assert.match(content, /^w1 w2 w3/);
  assert.ok(!content.includes('w20'), content);
});

test('a streamed tool call is assembled: its id, name and arguments', async () => {
  await logAllInFull();
  const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const { requestId } = await make(w.alice, '/v1/ai/chat/completions', { model: 'stub-model', stream: true, tools, messages: [{ role: 'user', content: 'weather in Lyon' }] });
  await logged(requestId);
  const msg = (await readLog(`request_id=${requestId}`)).body.response.body.choices[0];
  assert.equal(msg.finish_reason, 'tool_calls');
  assert.equal(msg.message.tool_calls[0].function.name, 'lookup');
  assert.deepEqual(JSON.parse(msg.message.tool_calls[0].function.arguments), { city: 'weather in Lyon' });
  assert.match(msg.message.tool_calls[0].id, /^call_stub_/);
});

test('caps: each body is kept up to 64 KiB and says it was truncated', async () => {
  await logAllInFull();
  const long = 'word '.repeat(40_000); // 200 KB of message
  const { requestId } = await make(w.alice, '/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: long }] });
  const row = await logged(requestId);
  assert.equal(row.truncated, 1);
  assert.ok(row.request_bytes > 200_000);
  const log = (await readLog(`request_id=${requestId}`)).body;
  assert.equal(log.request.truncated, true);
  assert.equal(typeof log.request.body, 'string');
  assert.ok(Buffer.byteLength(log.request.body) <= 64 * 1024, String(Buffer.byteLength(log.request.body)));
  assert.equal(log.response.truncated, true, 'the answer echoes the 200 KB too');
  const blob = blobFiles().find((f) => f.endsWith(row.blob_key.split('/').pop()));
  assert.ok(blob && statSync(blob).size < 140 * 1024, 'the blob holds two capped bodies');
});

test('reading: the admin and the city’s bureau (by request_id or usage_id); another city’s bureau 404, a user 403', async () => {
  await logAllInFull();
  const { requestId } = await make(w.alice, '/v1/ai/chat/completions', CALLS[0][2]);
  await logged(requestId);
  const usage = await until('the usage record', async () => (await w.admin.get(`/v1/usage/list?city_id=city-a&limit=200`)).body.items.find((u: any) => u.request_id === requestId));
  assert.equal((await readLog(`request_id=${requestId}`, bureauA)).status, 200);
  const byUsage = await readLog(`usage_id=${usage.usage_id}`, bureauA);
  assert.equal(byUsage.status, 200);
  assert.equal(byUsage.body.request_id, requestId);
  const other = await readLog(`request_id=${requestId}`, bureauB);
  assert.equal(other.status, 404);
  assert.equal((await readLog(`usage_id=${usage.usage_id}`, bureauB)).status, 404);
  const user = await readLog(`request_id=${requestId}`, w.alice);
  assert.equal(user.status, 403);
  // the admin client, with the bureau's token
  const viaClient = await createAdminClient({ baseURL: w.gw.url, bureauToken: bureauA }).usage.requestLog({ usage_id: usage.usage_id });
  assert.equal(viaClient.request_id, requestId);
  assert.equal(viaClient.request.headers.authorization, '[redacted]');
  assert.equal((await readLog('')).status, 400);
  assert.equal((await readLog('request_id=req_nope')).status, 404);
});

test('blobs are not served by the public files route', async () => {
  const row = (await rows()).find((r) => r.blob_key);
  assert.ok(row);
  const r = await call(w.gw.url, 'GET', `/v1/ai/files/${row.blob_key}`);
  assert.equal(r.status, 404);
  assert.ok(!r.text.includes('Hello from stub'));
});

test('retention: logs older than REQUEST_LOG_RETENTION_DAYS go with their blobs; newer ones stay', async () => {
  await logAllInFull();
  const a = await make(w.alice, '/v1/ai/chat/completions', CALLS[0][2]);
  const b = await make(w.alice, '/v1/ai/chat/completions', CALLS[0][2]);
  const oldRow = await logged(a.requestId);
  const newRow = await logged(b.requestId);
  const DAY = 86_400_000;
  // a's log is 8 days old, b's 6 (and every earlier log of this file 9)
  await sqlAll(w.gw, 'UPDATE request_logs SET created_at = ? WHERE request_id <> ? AND request_id <> ?', [Date.now() - 9 * DAY, a.requestId, b.requestId]);
  await sqlAll(w.gw, 'UPDATE request_logs SET created_at = ? WHERE request_id = ?', [Date.now() - 8 * DAY, a.requestId]);
  await sqlAll(w.gw, 'UPDATE request_logs SET created_at = ? WHERE request_id = ?', [Date.now() - 6 * DAY, b.requestId]);
  const blobOf = (key: string) => join(dirname(w.gw.dbPath), 'files', key);
  assert.ok(existsSync(blobOf(oldRow.blob_key)) && existsSync(blobOf(newRow.blob_key)));
  w.gw = await w.gw.restart({ USAGE_PRUNE_DELAY_S: '0', USAGE_PRUNE_BATCH: '3' });
  await until('the retention pass', async () => (await rows()).length === 1, 20_000);
  const left = await rows();
  assert.deepEqual(left.map((r) => r.request_id), [b.requestId]);
  assert.ok(!existsSync(blobOf(oldRow.blob_key)), 'the old blob is deleted');
  assert.ok(existsSync(blobOf(newRow.blob_key)), 'the newer blob is kept');
  assert.deepEqual(blobFiles().filter((f) => !f.endsWith('.type')).length, 1);
  assert.equal((await readLog(`request_id=${b.requestId}`)).status, 200);
  assert.equal((await readLog(`request_id=${a.requestId}`)).status, 404);
});

test('bodies whose log row never came (a hard kill between the two writes) go once their day is past retention', async () => {
  const dayDir = (daysAgo: number) => join(filesDir(), new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10));
  const put = (daysAgo: number, name: string) => {
    mkdirSync(dayDir(daysAgo), { recursive: true });
    writeFileSync(join(dayDir(daysAgo), name), '{"request":"kept past retention?"}');
    writeFileSync(join(dayDir(daysAgo), `${name}.type`), 'application/json');
  };
  put(9, 'orphan-a.json');
  put(9, 'orphan-b.json');
  put(2, 'orphan-recent.json');
  w.gw = await w.gw.restart({ USAGE_PRUNE_DELAY_S: '0' });
  await until('the old day swept', async () => !existsSync(dayDir(9)), 20_000);
  assert.ok(existsSync(join(dayDir(2), 'orphan-recent.json')), 'a day within retention keeps its files');
  // the pass says so once it has swept all three days (the folder goes before the line)
  const saidLines = () => w.gw.stdout().split('\n').filter((l) => l.includes('request-log bodies with no log row deleted'));
  await until('the pass says what it deleted', async () => saidLines().length > 0, 20_000);
  const said = saidLines();
  assert.equal(said.length, 1, w.gw.stdout().slice(-2000));
  assert.equal(JSON.parse(said[0]).count, 2);
});
