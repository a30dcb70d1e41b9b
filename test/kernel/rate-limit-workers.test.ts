// Rate limits across worker processes (issue 15): with RATE_LIMIT_USER_RPM=5 and
// GATEWAY_WORKERS=2, 8 calls spread over both workers give exactly 5 answers and 3 × 429 with
// Retry-After and x-ratelimit-*; the countdown in the headers runs across both workers (one
// shared counter, not one per process). Each call goes on its own connection, so node:cluster
// hands them to the workers in turn; which worker answered is read from /proc (the worker
// process that holds the server side of the call's connection).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf, type Res } from '../helpers/http.ts';
import { freshWindow } from '../helpers/rate-window.ts';
import { childPids } from '../helpers/proc.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';

let stub: OpenAIStub;
let gw: TestGateway;

before(async () => {
  stub = await startOpenAIStub({ record: false });
  gw = await startGateway({
    postgres: false,
    env: { GATEWAY_WORKERS: '2', TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', RATE_LIMIT_USER_RPM: '5' },
  });
});
after(async () => {
  await gw?.stop();
  await stub?.close();
});

/** The worker holding the server side of the TCP connection serverPort ← clientPort, if any. */
function workerOf(workers: number[], serverPort: number, clientPort: number): number | null {
  const hex = (p: number) => p.toString(16).toUpperCase().padStart(4, '0');
  let inode = '';
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(f, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9 && cols[1].endsWith(`:${hex(serverPort)}`) && cols[2].endsWith(`:${hex(clientPort)}`)) inode = cols[9];
    }
  }
  if (!inode) return null;
  for (const pid of workers) {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`) return pid;
      } catch {
        /* closed meanwhile */
      }
    }
  }
  return null;
}

/** One chat call on a connection of its own; `pid` is the worker that answered it. */
function chatOnNewConnection(token: string, workers: number[]): Promise<Res & { pid: number | null }> {
  const url = new URL('/v1/ai/chat/completions', gw.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const body = JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hello' }] });
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => {
        // The connection is still open (keep-alive): its server side names the worker.
        const pid = workerOf(workers, Number(url.port), req.socket!.localPort!);
        agent.destroy();
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode!, headers, body: parsed, text, pid });
      });
    });
    req.on('error', (e) => (agent.destroy(), reject(e)));
    req.end(body);
  });
}

test('GATEWAY_WORKERS=2, RATE_LIMIT_USER_RPM=5: 8 calls spread over both workers give 5 answers and 3 × 429 with Retry-After and x-ratelimit-*', async () => {
  const workers = await until('two workers', () => {
    const w = childPids(gw.child.pid!);
    return w.length === 2 ? w : null;
  }, 20_000);
  const admin = client(gw.url, gw.adminKey);
  assert.equal((await admin.post('/v1/cities/create', { name: 'w', city_id: 'rlw' })).status, 200);
  const alice = (await admin.post('/v1/cities/tokens/apply', { city_id: 'rlw', user_id: 'alice' })).body.user_token;
  const bob = (await admin.post('/v1/cities/tokens/apply', { city_id: 'rlw', user_id: 'bob' })).body.user_token;

  // All 8 calls in one fixed minute window (a window that ends midway would let the next
  // window's 5 through, as it should): start with at least 30 s of the window left.
  await freshWindow(30_000);
  const results: (Res & { pid: number | null })[] = [];
  for (let i = 0; i < 8; i++) results.push(await chatOnNewConnection(alice, workers!));

  const served = results.map((r) => r.pid);
  assert.ok(served.every((p) => p !== null), `each call's worker found: ${served.join(',')}`);
  assert.equal(new Set(served).size, 2, `both workers answered: ${served.join(',')}`);
  assert.ok(results.slice(0, 5).some((r) => r.pid === workers![0]) && results.slice(0, 5).some((r) => r.pid === workers![1]), 'both workers served some of the 5');
  assert.deepEqual(results.map((r) => r.status), [200, 200, 200, 200, 200, 429, 429, 429], `statuses by worker: ${results.map((r) => `${r.status}@${r.pid}`).join(', ')}`);
  // One counter for both workers: the remaining count runs down across them.
  assert.deepEqual(results.slice(0, 5).map((r) => r.headers.get('x-ratelimit-remaining-requests')), ['4', '3', '2', '1', '0']);
  for (const r of results.slice(0, 5)) assert.equal(r.headers.get('x-ratelimit-limit-requests'), '5');
  for (const r of results.slice(5)) {
    const e = errorOf(r);
    assert.equal(e.code, 'rate_limited');
    assert.equal(e.type, 'rate_limit_error');
    const retry = Number(r.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
    assert.equal(r.headers.get('x-ratelimit-limit-requests'), '5');
    assert.equal(r.headers.get('x-ratelimit-remaining-requests'), '0');
    assert.match(r.headers.get('x-ratelimit-reset-requests') ?? '', /^\d+(ms|s)$/);
  }
  // Another user of the same city is not limited, on either worker.
  const other = [await chatOnNewConnection(bob, workers!), await chatOnNewConnection(bob, workers!)];
  assert.deepEqual(other.map((r) => r.status), [200, 200]);
});
