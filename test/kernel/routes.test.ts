// The kernel's routes and its answers to bad input, seen from outside over HTTP.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';

let gw: TestGateway;
before(async () => {
  gw = await startGateway();
});
after(() => gw?.stop());

describe('open routes', () => {
  test('GET /health lists exactly the mounted services, no credential needed', async () => {
    const r = await call(gw.url, 'GET', '/health');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.ok, true);
    // No GATEWAY_SERVICES: every stock service, in catalog order, and nothing else.
    assert.deepEqual(r.body.services, ['env', 'cities', 'bureaus', 'accounts', 'balance', 'plans', 'payment', 'usage', 'ai', 'webhooks', 'mcp']);
    // Each listed id is really mounted: its unknown action is action_not_found, not service_not_found.
    for (const id of r.body.services) {
      const probe = await call(gw.url, 'GET', `/v1/${id}/no-such-action`, { token: gw.adminKey });
      assert.equal(errorOf(probe).code, 'action_not_found', id);
    }
  });

  test('GET / answers name and version', async () => {
    const r = await call(gw.url, 'GET', '/');
    assert.equal(r.status, 200);
    assert.equal(r.body.name, 'citygate');
    assert.match(r.body.version, /^\d+\.\d+\.\d+/);
  });

  test('GET /v1/services: env requirements for guests, configured flags only for the admin', async () => {
    const guest = await call(gw.url, 'GET', '/v1/services');
    assert.equal(guest.status, 200);
    const ids = guest.body.items.map((s: { id: string }) => s.id);
    const health = await call(gw.url, 'GET', '/health');
    assert.deepEqual(ids, health.body.services);
    for (const s of guest.body.items) {
      assert.equal(typeof s.name, 'string');
      for (const e of s.env) assert.equal('configured' in e, false);
    }
    const admin = await call(gw.url, 'GET', '/v1/services', { token: gw.adminKey });
    const withEnv = admin.body.items.flatMap((s: { env: object[] }) => s.env);
    for (const e of withEnv) assert.equal(typeof (e as { configured: unknown }).configured, 'boolean');
  });

  test('GET /.well-known/jwks.json publishes one Ed25519 key', async () => {
    const r = await call(gw.url, 'GET', '/.well-known/jwks.json');
    assert.equal(r.status, 200);
    assert.equal(r.body.keys.length, 1);
    assert.equal(r.body.keys[0].kty, 'OKP');
    assert.equal(r.body.keys[0].crv, 'Ed25519');
    assert.equal(r.body.keys[0].d, undefined, 'never the private part');
  });

  test('CORS preflight is answered for any origin by default', async () => {
    const res = await fetch(`${gw.url}/v1/ai/chat/completions`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('access-control-allow-origin'), 'https://app.example.com');
    assert.match(res.headers.get('access-control-allow-headers') ?? '', /authorization/i);
  });
});

describe('bad input gets a 4xx in the one error shape', () => {
  test('unknown route, service and action → 404', async () => {
    for (const [path, code] of [
      ['/nope', 'route_not_found'],
      ['/v1/nope/list', 'service_not_found'],
      ['/v1/cities/nope', 'action_not_found'],
    ]) {
      const r = await call(gw.url, 'GET', path, { token: gw.adminKey });
      assert.equal(r.status, 404, path);
      assert.equal(errorOf(r).code, code);
    }
  });

  test('wrong method → 405 with Allow', async () => {
    const r = await call(gw.url, 'GET', '/v1/cities/create', { token: gw.adminKey });
    assert.equal(r.status, 405);
    assert.equal(r.headers.get('allow'), 'POST');
    assert.equal(errorOf(r).code, 'method_not_allowed');
  });

  test('malformed JSON → 400 invalid_json, nothing created', async () => {
    const r = await call(gw.url, 'POST', '/v1/cities/create', { token: gw.adminKey, raw: '{"name": "x",', headers: { 'content-type': 'application/json' } });
    assert.equal(r.status, 400);
    assert.equal(errorOf(r).code, 'invalid_json');
    const list = await call(gw.url, 'GET', '/v1/cities/list', { token: gw.adminKey });
    assert.equal(list.body.items.some((c: { name: string }) => c.name === 'x'), false);
  });

  test('a body that fails the schema → 400 naming the field', async () => {
    const r = await call(gw.url, 'POST', '/v1/cities/create', { token: gw.adminKey, body: { name: 42 } });
    assert.equal(r.status, 400);
    const e = errorOf(r);
    assert.equal(e.code, 'invalid_input');
    assert.equal(e.param, 'name');
    assert.equal(e.type, 'invalid_request_error');
  });

  test('a body that is JSON but not an object → 400', async () => {
    for (const raw of ['[]', '"text"', '12', 'null']) {
      const r = await call(gw.url, 'POST', '/v1/cities/create', { token: gw.adminKey, raw, headers: { 'content-type': 'application/json' } });
      assert.equal(r.status, 400, raw);
      errorOf(r);
    }
  });

  test('a body over 1 MiB → 413, with or without Content-Length', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) });
    const r = await call(gw.url, 'POST', '/v1/cities/create', { token: gw.adminKey, raw: big, headers: { 'content-type': 'application/json' } });
    assert.equal(r.status, 413);
    assert.equal(errorOf(r).code, 'body_too_large');
    // Chunked: no Content-Length, the limit is enforced while reading.
    const stream = new ReadableStream({
      start(ctl) {
        ctl.enqueue(new TextEncoder().encode(big));
        ctl.close();
      },
    });
    const res = await fetch(`${gw.url}/v1/cities/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.adminKey}`, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 413);
  });

  test('no credential → 401; malformed Authorization → 401; wrong key → 401', async () => {
    const none = await call(gw.url, 'GET', '/v1/cities/list');
    assert.equal(none.status, 401);
    assert.equal(errorOf(none).code, 'missing_credential');
    const malformed = await call(gw.url, 'GET', '/v1/cities/list', { headers: { authorization: 'Basic abc' } });
    assert.equal(malformed.status, 401);
    const wrong = await call(gw.url, 'GET', '/v1/cities/list', { token: 'cg_admin_wrong' });
    assert.equal(wrong.status, 401);
    assert.equal(errorOf(wrong).type, 'authentication_error');
  });

  test('odd paths and methods never answer 500', async () => {
    const probes: [string, string][] = [
      ['GET', '/v1/'],
      ['GET', '/v1'],
      ['POST', '/v1/cities/'],
      ['GET', '/v1/cities/tokens/apply/extra'],
      ['PUT', '/v1/cities/create'],
      ['DELETE', '/v1/env/remove'],
      ['GET', '/v1/%E0%A4%A/list'],
      ['GET', '/v1/cities/list?limit=abc&limit=2'],
      ['POST', '/v1/env/upsert'],
    ];
    for (const [m, p] of probes) {
      const r = await call(gw.url, m, p, { token: gw.adminKey, raw: m === 'GET' ? undefined : '{}' });
      assert.ok(r.status >= 400 && r.status < 500 || r.status === 200, `${m} ${p} → ${r.status} ${r.text}`);
      if (r.status >= 400) errorOf(r);
    }
  });
});

describe('logging', () => {
  test('one structured line per request with route and status, never a credential or a body', async () => {
    const secretBody = 'very-secret-body-value-123';
    const lines = () => gw.stdout().split('\n').filter(Boolean).map((l) => JSON.parse(l));
    // A route no earlier test of this file calls, so the line found is this request's.
    const up = await call(gw.url, 'POST', '/v1/env/import', { token: gw.adminKey, body: { content: `LOG_PROBE=${secretBody}\n` } });
    assert.equal(up.status, 200, up.text);
    // The line is written after the response: wait for it, not for a fixed time.
    const line = await until('the log line of the request', () => lines().find((l) => l.route === '/v1/env/import'));
    assert.equal(line.method, 'POST');
    assert.equal(line.status, 200);
    assert.equal(typeof line.duration_ms, 'number');
    assert.equal(line.identity, 'admin');
    const all = gw.stdout() + gw.stderr().replace(/generated the admin key[\s\S]*?Read it again/, '');
    assert.equal(all.includes(gw.adminKey), false, 'admin key never logged after the first-boot notice');
    assert.equal(all.includes(secretBody), false, 'request bodies never logged');
  });
});

describe('CORS_ORIGINS allow-list', () => {
  const preflight = (origin: string) =>
    fetch(`${gw.url}/v1/ai/chat/completions`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });

  test('only the listed origins are allowed, for preflights and for requests; removing it allows any again', async () => {
    const set = await call(gw.url, 'POST', '/v1/env/upsert', { token: gw.adminKey, body: { key: 'CORS_ORIGINS', value: 'https://app.example.com, https://admin.example.com' } });
    assert.equal(set.status, 200, set.text);
    try {
      for (const ok of ['https://app.example.com', 'https://admin.example.com']) {
        const res = await preflight(ok);
        assert.equal(res.status, 204);
        assert.equal(res.headers.get('access-control-allow-origin'), ok);
      }
      const denied = await preflight('https://evil.example.com');
      assert.equal(denied.headers.get('access-control-allow-origin'), null, 'an unlisted origin gets no allow header');
      // A simple request from an unlisted origin: the answer carries no allow header, so the
      // browser will not hand it to the page.
      const get = await fetch(`${gw.url}/health`, { headers: { origin: 'https://evil.example.com' } });
      assert.equal(get.headers.get('access-control-allow-origin'), null);
      const own = await fetch(`${gw.url}/health`, { headers: { origin: 'https://app.example.com' } });
      assert.equal(own.headers.get('access-control-allow-origin'), 'https://app.example.com');
      assert.match(own.headers.get('access-control-expose-headers') ?? '', /x-request-id/);
    } finally {
      assert.equal((await call(gw.url, 'POST', '/v1/env/remove', { token: gw.adminKey, body: { key: 'CORS_ORIGINS' } })).status, 200);
    }
    const any = await preflight('https://evil.example.com');
    assert.equal(any.headers.get('access-control-allow-origin'), 'https://evil.example.com');
  });
});
