// A caller's URL never makes citygate reach inside its own network (docs/security.md, "Outbound
// fetches"). The gateway resolves callers' hosts through a DNS stub (AI_FETCH_DNS_SERVERS) in
// which `canary.citygate.test` resolves to 127.0.0.1, where a canary server counts every TCP
// connection it gets: a name that resolves to loopback must be refused after resolution, on the
// asr URL and on the four image/file paths of translated upstreams, before any upstream is
// tried. And a poisoned URL is the caller's 400, so it never cools an upstream down for others.
// 127.0.0.2 is allowed (AI_FETCH_ALLOW_PRIVATE=127.0.0.2/32): an image there is fetched and its
// bytes handed to the upstream; its redirect to the canary is refused.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { call, errorOf } from '../helpers/http.ts';
import { startDnsStub, type DnsStub } from '../stubs/dns.ts';
import { RICH_USERS, startAiWorld, type AiWorld } from './setup.ts';

const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

let w: AiWorld;
let dns: DnsStub;
let canary: Server;
let allowed: Server;
let canaryConnections = 0;
let canaryPort = 0;
let allowedBase = '';
/** What flip.citygate.test resolves to now (DNS rebinding: allowed first, loopback next). */
let flipTo = '127.0.0.2';

function imageServer(onConnection: () => void, redirectTo?: () => string): Server {
  const s = createServer((req, res) => {
    if (redirectTo && req.url === '/redirect.png') {
      res.writeHead(302, { location: redirectTo() });
      return res.end();
    }
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.byteLength, connection: 'close' });
    res.end(PNG);
  });
  s.on('connection', onConnection);
  return s;
}

before(async () => {
  // the allowed server and the canary on one port, at 127.0.0.2 and 127.0.0.1: a name can move between them
  for (let tries = 0; ; tries++) {
    allowed = imageServer(() => {}, () => `http://canary.citygate.test:${canaryPort}/x.png`);
    await new Promise<void>((r) => allowed.listen(0, '127.0.0.2', r));
    canaryPort = (allowed.address() as AddressInfo).port;
    canary = imageServer(() => canaryConnections++);
    const ok = await new Promise<boolean>((r) => canary.once('error', () => r(false)).listen(canaryPort, '127.0.0.1', () => r(true)));
    if (ok) break;
    await new Promise((r) => allowed.close(r)); // that port is taken on 127.0.0.1: another pair
    if (tries > 20) throw new Error('no port free on both 127.0.0.1 and 127.0.0.2');
  }
  allowedBase = `http://127.0.0.2:${canaryPort}`;
  dns = await startDnsStub({ 'canary.citygate.test': ['127.0.0.1'], 'canary6.citygate.test': ['::1'], 'flip.citygate.test': () => [flipTo] });
  w = await startAiWorld({
    env: {
      ...RICH_USERS,
      OPENAI_API_KEY: 'sk-stub',
      AI_FETCH_DNS_SERVERS: dns.server,
      AI_FETCH_ALLOW_PRIVATE: '127.0.0.2/32',
      // the defaults: retries and the circuit breaker on
      AI_MAX_ATTEMPTS: '3',
      AI_COOLDOWN_FAILURES: '3',
    },
  });
});
after(async () => {
  await w?.close();
  await dns?.close();
  for (const s of [canary, allowed]) {
    s?.closeAllConnections();
    await new Promise((r) => (s ? s.close(r) : r(null)));
  }
});

/** The error code, in the one error shape or in the Messages API's (which names it in the message). */
function codeOf(r: { body: any; text: string }): string {
  if (r.body?.type === 'error') return /\((\w+)\)$/.exec(r.body.error?.message ?? '')?.[1] ?? r.text;
  return errorOf(r as never).code;
}

const canaryUrl = (path = 'x.png') => `http://canary.citygate.test:${canaryPort}/${path}`;
const chats = () => w.stub.requests.filter((r) => r.path === '/v1/chat/completions').length;

/** The image/file paths of translated upstreams (the four, and chat/completions translated), each with an image at `url`. */
const PATHS: [string, string, (url: string) => unknown][] = [
  ['Responses input_image', '/v1/ai/responses', (url) => ({ model: 'stub-model', input: [{ role: 'user', content: [{ type: 'input_text', text: 'what is it' }, { type: 'input_image', image_url: url }] }] })],
  ['Messages image block with a url source', '/v1/ai/messages', (url) => ({ model: 'stub-model', max_tokens: 50, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url } }, { type: 'text', text: 'what is it' }] }] })],
  ['image_url on /v1/ai/text', '/v1/ai/text', (url) => ({ model: 'stub-model', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is it' }, { type: 'image_url', image_url: { url } }] }] })],
  ['a file part on /v1/ai/stream', '/v1/ai/stream', (url) => ({ model: 'stub-model', messages: [{ role: 'user', parts: [{ type: 'text', text: 'what is it' }, { type: 'file', mediaType: 'image/png', url }] }] })],
  ['image_url on chat/completions, translated', '/v1/ai/chat/completions', (url) => ({ model: 'translated', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is it' }, { type: 'image_url', image_url: { url } }] }] })],
];

describe('SSRF: a hostname that resolves to loopback is refused at connect time', () => {
  test('asr url: 400 audio_unreadable, the canary gets no connection, the upstream no call', async () => {
    const before = [canaryConnections, w.stub.requests.length];
    const r = await call(w.gw.url, 'POST', '/v1/ai/asr', { token: w.alice, body: { model: 'openai/whisper-1', url: `https://canary.citygate.test:${canaryPort}/a.wav` } });
    assert.equal(r.status, 400, r.text);
    assert.deepEqual([errorOf(r).code, errorOf(r).param], ['audio_unreadable', 'url']);
    assert.match(errorOf(r).message, /not a public one \(loopback\)/);
    assert.deepEqual([canaryConnections, w.stub.requests.length], before);
    assert.ok(dns.queries.includes('canary.citygate.test'), 'the name was resolved, then refused');
  });

  for (const [name, path, body] of PATHS) {
    test(`${name}: 400 input_unreadable before any upstream is tried`, async () => {
      for (const url of [canaryUrl(), `http://canary6.citygate.test:${canaryPort}/x.png`, `http://127.0.0.1:${canaryPort}/x.png`, `http://[::ffff:127.0.0.1]:${canaryPort}/x.png`, `http://2130706433:${canaryPort}/x.png`, 'file:///etc/passwd']) {
        const before = [canaryConnections, chats()];
        const r = await call(w.gw.url, 'POST', path, { token: w.alice, body: body(url) });
        assert.equal(r.status, 400, `${url}: ${r.text}`);
        assert.equal(codeOf(r), 'input_unreadable', url);
        assert.deepEqual([canaryConnections, chats()], before, url);
      }
    });
  }

  test('an allowed source (AI_FETCH_ALLOW_PRIVATE) is fetched by citygate and its bytes go to the upstream; its redirect to the canary is refused', async () => {
    const ok = await call(w.gw.url, 'POST', '/v1/ai/text', { token: w.alice, body: PATHS[2][2](`${allowedBase}/cat.png`) });
    assert.equal(ok.status, 200, ok.text);
    const sent = (w.stub.requests.at(-1)!.body as any).messages[0].content;
    assert.equal(sent.find((p: any) => p.type === 'image_url').image_url.url, `data:image/png;base64,${PNG.toString('base64')}`);
    const before = [canaryConnections, chats()];
    const r = await call(w.gw.url, 'POST', '/v1/ai/text', { token: w.alice, body: PATHS[2][2](`${allowedBase}/redirect.png`) });
    assert.equal(r.status, 400, r.text);
    assert.equal(errorOf(r).code, 'input_unreadable');
    assert.deepEqual([canaryConnections, chats()], before);
  });
});

describe('DNS rebinding', () => {
  test('a name that resolved to an allowed address, then to loopback, is refused on its next connection', async () => {
    const url = `http://flip.citygate.test:${canaryPort}/cat.png`;
    flipTo = '127.0.0.2';
    const first = await call(w.gw.url, 'POST', '/v1/ai/text', { token: w.alice, body: PATHS[2][2](url) });
    assert.equal(first.status, 200, first.text);
    flipTo = '127.0.0.1';
    const before = [canaryConnections, chats()];
    const second = await call(w.gw.url, 'POST', '/v1/ai/text', { token: w.alice, body: PATHS[2][2](url) });
    assert.equal(second.status, 400, second.text);
    assert.equal(codeOf(second), 'input_unreadable');
    assert.deepEqual([canaryConnections, chats()], before);
  });
});

describe('breaker poisoning', () => {
  test('100 poisoned requests from one city leave every breaker closed for the other cities', async () => {
    const urls = [canaryUrl(), 'http://127.0.0.1:1/x.png', 'http://nowhere.citygate.test/x.png', `${allowedBase}/redirect.png`];
    const codes = new Map<string, number>();
    for (let i = 0; i < 100; i += 10) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, (_, j) => {
          const [, path, body] = PATHS[(i + j) % PATHS.length];
          return call(w.gw.url, 'POST', path, { token: w.alice, body: body(urls[(i + j) % urls.length]) });
        }),
      );
      for (const r of batch) codes.set(`${r.status} ${codeOf(r)}`, (codes.get(`${r.status} ${codeOf(r)}`) ?? 0) + 1);
    }
    assert.deepEqual([...codes], [['400 input_unreadable', 100]]);
    // city B, on the same models, through every API
    const chat = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.bob, body: { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] } });
    assert.equal(chat.status, 200, chat.text);
    for (const [name, path] of PATHS) {
      const body = path === '/v1/ai/chat/completions' ? { model: 'translated', messages: [{ role: 'user', content: 'hi' }] } : path === '/v1/ai/stream' ? { model: 'stub-model', messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }] } : path === '/v1/ai/text' ? { model: 'stub-model', prompt: 'hi' } : path === '/v1/ai/messages' ? { model: 'stub-model', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] } : { model: 'stub-model', input: 'hi' };
      const r = await call(w.gw.url, 'POST', path, { token: w.bob, body });
      assert.equal(r.status, 200, `${name}: ${r.text}`);
    }
    const metrics = await call(w.gw.url, 'GET', '/metrics', { token: w.gw.adminKey });
    assert.equal(metrics.status, 200, metrics.text);
    assert.match(metrics.text, /# TYPE citygate_upstream_failures_total counter/);
    assert.doesNotMatch(metrics.text, /^citygate_upstream_failures_total\{[^}]*\} [1-9]/m, 'no upstream failure was counted');
  });
});
