// GET /openapi.json: a valid OpenAPI 3.1 document of exactly the mounted actions, whose input
// schemas accept and reject what the server accepts and rejects.
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { METHODS } from '../../src/client/routes.ts';
import { stockServices } from '../../src/services/index.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';

let full: TestGateway;
let small: TestGateway;
let doc: any;
let smallDoc: any;
let user: string;

before(async () => {
  [full, small] = await Promise.all([startGateway(), startGateway({ env: { GATEWAY_SERVICES: 'env,cities' } })]);
  doc = (await call(full.url, 'GET', '/openapi.json')).body;
  smallDoc = (await call(small.url, 'GET', '/openapi.json')).body;
  const admin = client(full.url, full.adminKey);
  await admin.post('/v1/cities/create', { name: 'Docs', city_id: 'docs' });
  user = (await admin.post('/v1/cities/tokens/apply', { city_id: 'docs', user_id: 'u1' })).body.user_token;
});
after(() => Promise.all([full?.stop(), small?.stop()]));

/** `{ "ai": { "text": "POST", … }, … }` from the document's /v1 paths. */
function actionsOf(d: any): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const [path, ops] of Object.entries<any>(d.paths)) {
    const m = /^\/v1\/([^/]+)(?:\/(.+))?$/.exec(path); // `/v1/mcp`: the service's own endpoint, action ''
    if (!m || path === '/v1/services') continue; // the kernel's own route, not an action
    const action = (m[2] ?? '').replace(/\{path\}$/, '*');
    for (const method of Object.keys(ops)) (out[m[1]] ??= {})[action] = method.toUpperCase();
  }
  return out;
}

describe('the document', () => {
  test('validates against the OpenAPI 3.1 schema (both deployments)', async () => {
    for (const d of [doc, smallDoc]) {
      const r = await new Validator().validate(d);
      assert.equal(r.valid, true, JSON.stringify(r.errors, null, 2)?.slice(0, 2000));
      assert.equal(d.openapi, '3.1.0');
    }
  });

  test('lists exactly the mounted services: the same as /health, on a full and an env,cities gateway', async () => {
    for (const [gw, d] of [[full, doc], [small, smallDoc]] as const) {
      const health = (await call(gw.url, 'GET', '/health')).body;
      assert.deepEqual(Object.keys(actionsOf(d)).sort(), [...health.services].sort());
      assert.deepEqual(d.tags.map((t: any) => t.name).sort(), [...health.services].sort());
    }
    assert.deepEqual(Object.keys(actionsOf(smallDoc)).sort(), ['cities', 'env']);
    assert.ok(!Object.keys(smallDoc.paths).some((p) => p.startsWith('/v1/ai/')));
  });

  test('lists exactly the registered actions with their methods (and the client knows them all)', () => {
    const documented = actionsOf(doc);
    const registered = Object.fromEntries(stockServices.map((s) => [s.id, Object.fromEntries(Object.entries(s.actions).map(([id, a]) => [id, a.method]))]));
    assert.deepEqual(documented, registered);
    assert.deepEqual(documented, METHODS, 'src/client/routes.ts matches the server');
  });

  test('every documented action is mounted: the other method answers 405, an undocumented action 404', async () => {
    const checks = Object.entries(actionsOf(doc)).flatMap(([svc, actions]) =>
      Object.entries(actions).map(async ([id, method]) => {
        const path = id === '' ? `/v1/${svc}` : `/v1/${svc}/${id.replace(/\*$/, 'x')}`;
        if (Object.keys(doc.paths[id === '' ? path : `/v1/${svc}/${id.replace(/\*$/, '{path}')}`]).length > 1) return; // it answers both methods
        const r = await call(full.url, method === 'GET' ? 'POST' : 'GET', path);
        assert.equal(r.status, 405, `${path}: ${r.text}`);
        assert.equal(r.headers.get('allow'), method);
      }),
    );
    await Promise.all(checks);
    for (const svc of Object.keys(actionsOf(doc))) {
      const r = await call(full.url, 'GET', `/v1/${svc}/not-an-action`);
      assert.equal(r.status, 404);
      assert.equal(r.body.error.code, 'action_not_found');
    }
    assert.equal((await call(small.url, 'POST', '/v1/ai/text', { body: {} })).body.error.code, 'service_not_found');
  });

  test('every operation states its identities, security and error responses', () => {
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      if (!/^\/v1\/[^/]+\/.+/.test(path)) continue;
      for (const op of Object.values<any>(ops)) {
        assert.ok(Array.isArray(op['x-citygate-identities']) && op['x-citygate-identities'].length, path);
        assert.ok(Array.isArray(op.security), path);
        for (const st of ['200', '400', '404', '405']) assert.ok(op.responses[st], `${path} ${st}`);
        if (!op['x-citygate-identities'].includes('guest')) assert.ok(op.responses['401'] && op.responses['403'], path);
        assert.equal(op.responses['400'].content['application/json'].schema.$ref, '#/components/schemas/Error');
      }
    }
    assert.ok(doc.paths['/v1/ai/text'].post.responses['402'], 'billed calls document 402');
    assert.deepEqual(doc.paths['/v1/cities/create'].post['x-citygate-identities'], ['admin']);
    assert.ok(doc.paths['/v1/ai/stream'].post.responses['200'].content['text/event-stream']);
    assert.ok(doc.paths['/v1/ai/asr'].post.requestBody.content['multipart/form-data']);
    assert.equal(doc.paths['/v1/ai/text'].post.responses['200'].content['application/json'].schema.properties.role.const, 'assistant');
  });
});

describe('documented output schemas', () => {
  const ajv = addFormats.default(new Ajv2020({ strict: false }));
  const out = (path: string) => {
    const ops = doc.paths[path];
    return (ops.get ?? ops.post).responses['200'].content['application/json'].schema;
  };

  test('cities/get, list and update document one city-with-settings shape; real answers match it; cities/current has no settings', async () => {
    const get = out('/v1/cities/get');
    assert.deepEqual(out('/v1/cities/update'), get);
    assert.deepEqual(out('/v1/cities/list').properties.items.items, get);
    assert.deepEqual(Object.keys(get.properties.limits.properties).sort(), ['city_rpm', 'city_tpm', 'user_concurrency', 'user_rpm', 'user_tpm']);
    assert.ok(get.required.includes('limits') && get.required.includes('user_budget'));
    assert.equal(out('/v1/cities/current').properties.limits, undefined, 'a user token reads no settings');

    const admin = client(full.url, full.adminKey);
    const validate = ajv.compile(get);
    const set = await admin.post('/v1/cities/update', { city_id: 'docs', limits: { user_rpm: 7 }, user_budget: { credits: 9, period: 'day' } });
    const cleared = await admin.post('/v1/cities/update', { city_id: 'docs', limits: null, user_budget: null });
    const read = await admin.get('/v1/cities/get?city_id=docs');
    const listed = (await admin.get('/v1/cities/list')).body.items.find((c: { city_id: string }) => c.city_id === 'docs');
    for (const [what, body] of [['set', set.body], ['cleared', cleared.body], ['get', read.body], ['list', listed]]) {
      assert.ok(validate(body), `${what}: ${JSON.stringify(validate.errors)} ${JSON.stringify(body)}`);
    }
    assert.deepEqual(read.body, cleared.body, 'get answers what the last update answered');
  });
});

describe('documented input schemas reject what the server rejects', () => {
  const ajv = addFormats.default(new Ajv2020({ strict: false }));

  /** The documented schema of an action's input: the JSON body, or the query parameters. */
  function inputSchema(path: string): { method: 'GET' | 'POST'; validate: (v: unknown) => boolean } {
    const ops = doc.paths[path];
    if (ops.post) {
      const schema = ops.post.requestBody.content['application/json'].schema;
      const v = ajv.compile(schema);
      return { method: 'POST', validate: (x) => v(x) as boolean };
    }
    const params: any[] = ops.get.parameters ?? [];
    const schema = {
      type: 'object',
      properties: Object.fromEntries(params.map((p) => [p.name, p.schema])),
      required: params.filter((p) => p.required).map((p) => p.name),
    };
    // Query values arrive as strings: validate them the way a query is read (coerced).
    const v = addFormats.default(new Ajv2020({ strict: false, coerceTypes: true })).compile(schema);
    return { method: 'GET', validate: (x) => v(structuredClone(x)) as boolean };
  }

  // [path, credential, input, accepted?]: a sample per service, both ways.
  const admin = () => full.adminKey;
  const samples: [string, () => string | undefined, Record<string, unknown>, boolean][] = [
    ['/v1/env/upsert', admin, { key: 'lower-case', value: 'x' }, false],
    ['/v1/env/upsert', admin, { key: 'SOME_KEY', value: 5 }, false],
    ['/v1/env/upsert', admin, { key: 'SOME_KEY', value: 'v' }, true],
    ['/v1/cities/create', admin, { name: 'x', city_id: '-bad id' }, false],
    ['/v1/cities/create', admin, { name: '' }, false],
    ['/v1/cities/create', admin, { name: 'Fine', city_id: 'fine-city' }, true],
    ['/v1/cities/tokens/apply', admin, { city_id: 'docs', user_id: 'u2', ttl: 5 }, false],
    ['/v1/cities/tokens/apply', admin, { city_id: 'docs', user_id: 'u2', ttl: 3600 }, true],
    ['/v1/bureaus/create', admin, { city_id: 'docs' }, false],
    ['/v1/bureaus/create', admin, { city_id: 'docs', name: 'backend' }, true],
    ['/v1/accounts/login', () => undefined, { city_id: 'docs', user_id: '!nope' }, false],
    ['/v1/accounts/login', () => undefined, { city_id: 'docs', user_id: 'u3' }, true],
    ['/v1/accounts/oauth/start', () => undefined, { city_id: 'docs', provider: 'myspace' }, false],
    ['/v1/accounts/users', admin, { limit: '500' }, false],
    ['/v1/accounts/users', admin, { limit: '10' }, true],
    ['/v1/balance/adjust', admin, { city_id: 'docs', user_id: 'u1', credits: 1.5, reason: 'r', idempotency_key: 'k' }, false],
    ['/v1/balance/adjust', admin, { city_id: 'docs', user_id: 'u1', credits: 10, reason: 'r', idempotency_key: 'k' }, true],
    ['/v1/balance/history', () => user, { limit: '0' }, false],
    ['/v1/balance/history', () => user, { limit: '5' }, true],
    ['/v1/payment/checkout', () => user, { method: 'paypal', credits: 10 }, false],
    ['/v1/payment/checkout', () => user, { method: 'a', credits: 0 }, false],
    ['/v1/usage/summary', admin, { from: 'yesterday' }, false],
    ['/v1/usage/summary', admin, { from: '2025-01-01' }, true],
    ['/v1/usage/list', admin, { status: 'weird' }, false],
    ['/v1/ai/text', () => user, { model: 'm', prompt: '' }, false],
    ['/v1/ai/text', () => user, { model: 'm', prompt: 'hi', temperature: 3 }, false],
    ['/v1/ai/tts', () => user, { model: 'm', text: 'hi', format: 'mp4' }, false],
    ['/v1/ai/image/create', () => user, { model: 'm', prompt: 'cat', n: 11 }, false],
    ['/v1/ai/image/create', () => user, { model: 'm', prompt: 'cat', size: 'big' }, false],
    ['/v1/ai/chat/completions', () => user, { model: 'm', messages: [] }, false],
  ];

  for (const [path, cred, input, ok] of samples) {
    test(`${path} ${JSON.stringify(input)} → ${ok ? 'accepted' : 'rejected'} by both`, async () => {
      const s = inputSchema(path);
      assert.equal(s.validate(input), ok, `the document ${ok ? 'rejects' : 'accepts'} it`);
      const r =
        s.method === 'POST'
          ? await call(full.url, 'POST', path, { token: cred(), body: input })
          : await call(full.url, 'GET', `${path}?${new URLSearchParams(input as Record<string, string>)}`, { token: cred() });
      // Accepted means answered: a 2xx, never an error (a 500 is no acceptance).
      if (ok) assert.ok(r.status >= 200 && r.status < 300, `the server does not accept it: ${r.status} ${r.text}`);
      else {
        assert.equal(r.status, 400, r.text);
        assert.equal(r.body.error.code, 'invalid_input');
      }
    });
  }
});
