// The Node upstream client (src/runtimes/node/upstream-http.ts) against a real local HTTP server:
// whole answers, streams read chunk by chunk with back-pressure (a slow reader gets every byte,
// in order, and the upstream socket is paused meanwhile instead of buffering the whole answer),
// an abort before and after the headers, a reader that stops early, and an unreachable upstream.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { undiciHttp } from '../../src/runtimes/node/upstream-http.ts';

const http = undiciHttp();
let server: Server;
let origin = '';
let bigWrittenAt = 0;
let bigDone = 0;
const CHUNK = Buffer.alloc(16 * 1024, 'x');
const CHUNKS = 4096; // 64 MB: far more than the kernel's socket buffers hold

before(async () => {
  server = createServer((req, res) => {
    if (req.url === '/json') {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'x-echo': String(req.headers['x-k'] ?? '') }).end(JSON.stringify({ got: body })));
    } else if (req.url === '/big') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let i = 0;
      const write = () => {
        while (i < CHUNKS) {
          const b = Buffer.from(CHUNK);
          b.writeUInt32BE(i++, 0);
          bigWrittenAt = i;
          if (!res.write(b)) return void res.once('drain', write);
        }
        res.end(() => (bigDone = Date.now()));
      };
      write();
    } else if (req.url === '/slow') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first');
      setTimeout(() => res.end('second'), 5000).unref();
    } else res.writeHead(404).end('no');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await http.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

test('a whole answer: status, headers and body as sent', async () => {
  const res = await http.request({ method: 'POST', url: `${origin}/json`, headers: { 'content-type': 'application/json', 'x-k': 'v1' }, body: '{"a":1}' });
  assert.equal(res.status, 200);
  assert.equal(res.header('content-type'), 'application/json');
  assert.equal(res.header('x-echo'), 'v1');
  assert.equal(res.header('x-missing'), null);
  assert.deepEqual(JSON.parse(await res.text()), { got: '{"a":1}' });
  const again = await http.request({ method: 'POST', url: `${origin}/json`, headers: {}, body: new TextEncoder().encode('b') });
  assert.deepEqual(JSON.parse(new TextDecoder().decode(await again.bytes())), { got: 'b' });
});

test('a slow reader of a 64 MB stream gets every byte in order, and the upstream waits for it', async () => {
  bigWrittenAt = 0;
  const res = await http.request({ method: 'GET', url: `${origin}/big`, headers: {} });
  let total = 0;
  let next = 0;
  let pending = Buffer.alloc(0);
  let writtenEarly = -1;
  for await (const chunk of res.body) {
    if (total === 0) {
      // The reader is slow at first: the server can only get so far ahead of it.
      await new Promise((r) => setTimeout(r, 300));
      writtenEarly = bigWrittenAt;
    }
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= CHUNK.length) {
      assert.equal(pending.readUInt32BE(0), next++, 'chunks in order');
      pending = pending.subarray(CHUNK.length);
    }
    total += chunk.byteLength;
  }
  assert.equal(total, CHUNK.length * CHUNKS);
  assert.equal(next, CHUNKS);
  assert.ok(writtenEarly < CHUNKS / 2, `the upstream wrote ${writtenEarly} of ${CHUNKS} chunks while the reader slept: not paused`);
});

test('an abort before the headers rejects with the reason; after them, the body read throws it', async () => {
  const ac = new AbortController();
  ac.abort(new DOMException('gone', 'TimeoutError'));
  await assert.rejects(http.request({ method: 'GET', url: `${origin}/slow`, headers: {}, signal: ac.signal }), { name: 'TimeoutError' });

  const ac2 = new AbortController();
  const res = await http.request({ method: 'GET', url: `${origin}/slow`, headers: {}, signal: ac2.signal });
  const it = res.body[Symbol.asyncIterator]();
  assert.equal(new TextDecoder().decode((await it.next()).value), 'first');
  const rest = it.next();
  ac2.abort(new DOMException('client closed', 'AbortError'));
  await assert.rejects(rest, { name: 'AbortError' });
});

test('a reader that stops early (return) ends the call; cancel() does too', async () => {
  const res = await http.request({ method: 'GET', url: `${origin}/slow`, headers: {} });
  for await (const chunk of res.body) {
    assert.equal(new TextDecoder().decode(chunk), 'first');
    break;
  }
  const started = Date.now();
  const other = await http.request({ method: 'GET', url: `${origin}/slow`, headers: {} });
  other.cancel();
  await assert.rejects(other.bytes());
  assert.ok(Date.now() - started < 4000, 'cancel did not wait for the answer to end');
});

test('an unreachable upstream rejects with a network error', async () => {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as AddressInfo).port;
  await new Promise((r) => probe.close(r));
  await assert.rejects(http.request({ method: 'GET', url: `http://127.0.0.1:${port}/x`, headers: {} }), (e: { code?: string }) => /^(ECONNREFUSED|UND_ERR)/.test(String(e.code)));
});
