// The gateway as a Cloudflare Worker, run by workerd through Miniflare with a local D1
// (persisted to a temporary directory), a local queue consumed by the same Worker and a
// local R2 bucket. Black-box over HTTP, the same checks as the Node server.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { join } from 'node:path';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { readFileSync } from 'node:fs';
import { bundleWorker, nodeBuiltinImports, startWorker, type TestWorker } from '../helpers/worker.ts';
import { conformance } from './conformance.ts';

const PROBE_ENTRY = join(import.meta.dirname, 'fixtures/probe-worker.ts');

async function until<T>(what: string, fn: () => Promise<T | null | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let bundle: string;
before(() => {
  bundle = bundleWorker(PROBE_ENTRY);
});

describe('Worker in workerd (Miniflare, local D1/Queues/R2)', () => {
  let w: TestWorker;
  let adminKey: string;

  before(async () => {
    w = await startWorker({ bundle, storage: { publicUrlPrefix: 'https://media.example.com' } });
    // Seed §1: the first GET /health initializes the service.
    const h = await call(w.url, 'GET', '/health');
    assert.equal(h.status, 200, w.logs());
    adminKey = await w.adminKey();
  });
  after(() => w?.stop());

  test('the first /health created the built-in tables, the admin key and the signing key in D1', async () => {
    const tables = (await w.sql<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table'`)).map((r) => r.name);
    for (const t of ['env', 'cities', 'signing_keys', '_migrations']) assert.ok(tables.includes(t), `table ${t}`);
    assert.match(adminKey, /^cg_admin_/);
    assert.equal((await w.sql(`SELECT kid FROM signing_keys WHERE status = 'active'`)).length, 1);
    const h = await call(w.url, 'GET', '/health');
    assert.deepEqual(h.body.services.slice(0, 2), ['env', 'cities']);
  });

  for (const [name, check] of Object.entries(conformance)) {
    test(name, () => check({ url: w.url, adminKey }));
  }

  test('env written through the API is what an operator reads with SQL', async () => {
    await client(w.url, adminKey).post('/v1/env/upsert', { key: 'GATEWAY_CITY_BASE_URL', value: 'https://city.example.com' });
    const rows = await w.sql<{ value: string }>(`SELECT value FROM env WHERE key = ?`, 'GATEWAY_CITY_BASE_URL');
    assert.equal(rows[0]?.value, 'https://city.example.com');
  });

  test('a job goes through the local queue to the same Worker (and a RetryJob is retried)', async () => {
    const admin = client(w.url, adminKey);
    assert.equal((await admin.post('/v1/probe/jobs/enqueue', { id: 'j1' })).status, 200);
    assert.equal((await admin.post('/v1/probe/jobs/enqueue', { id: 'j2', retry_first: true })).status, 200);
    const state = (id: string) => admin.get(`/v1/probe/state?key=PROBE_JOB_${id.toUpperCase()}`).then((r) => r.body.value as string);
    await until('job j1', async () => (await state('j1')) === 'done');
    await until('job j2 after a retry', async () => (await state('j2')) === 'done-after-retry');
  });

  test('R2 stores media behind the BlobStore, with the public URL prefix', async () => {
    const admin = client(w.url, adminKey);
    const put = await admin.post('/v1/probe/blob/put', { key: 'img/a b.png', text: 'PNG…', content_type: 'image/png' });
    assert.equal(put.status, 200);
    assert.deepEqual(put.body, { stored: true, public_url: 'https://media.example.com/img/a%20b.png' });
    const got = await call(w.url, 'GET', `/v1/probe/blob/get?key=${encodeURIComponent('img/a b.png')}`, { token: adminKey });
    assert.equal(got.status, 200);
    assert.equal(got.headers.get('content-type'), 'image/png');
    assert.equal(got.text, 'PNG…');
  });

  test('background work outlives the response (ctx.waitUntil)', async () => {
    const admin = client(w.url, adminKey);
    const r = await admin.post('/v1/probe/background', { id: 'bg1' });
    assert.deepEqual(r.body, { accepted: 'bg1' });
    await until('background write', async () => (await admin.get('/v1/probe/state?key=PROBE_BG_BG1')).body.value === 'done');
  });

  test('data survives a restart of the Worker on the same D1 state directory', async () => {
    const admin = client(w.url, adminKey);
    await admin.post('/v1/cities/create', { name: 'Durable', city_id: 'durable' });
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'durable', user_id: 'u' })).body.user_token as string;
    w = await w.restart();
    assert.equal(await w.adminKey(), adminKey, 'same admin key');
    const again = client(w.url, adminKey);
    const list = await again.get('/v1/cities/list');
    assert.equal(list.status, 200);
    assert.ok(list.body.items.some((c: { city_id: string }) => c.city_id === 'durable'));
    // The signing key survived too: a token issued before the restart still verifies
    // (a user token is refused by admin routes with 403, not 401).
    assert.equal((await call(w.url, 'GET', '/v1/cities/list', { token })).status, 403);
    assert.equal((await again.get('/v1/env/list?reveal=true')).body.items.find((e: { key: string }) => e.key === 'GATEWAY_CITY_BASE_URL')?.value, 'https://city.example.com');
  });
});

test('shared code uses no Node-only API: the wrangler bundle (no nodejs_compat) imports no node: module', () => {
  assert.deepEqual(nodeBuiltinImports(readFileSync(bundle, 'utf8')), []);
  // The detector itself finds what wrangler leaves external.
  assert.deepEqual(nodeBuiltinImports('import { readFileSync } from "node:fs";\nconst x = await import("node:sqlite");'), ['node:fs', 'node:sqlite']);
});

describe('cold start', () => {
  test('two requests at once on a cold Worker (and a second isolate) create one admin key and one signing key', async () => {
    const w = await startWorker({ bundle, secondIsolate: true });
    try {
      const [a, b, c] = await Promise.all([
        call(w.url, 'GET', '/health'),
        call(w.url, 'GET', '/health'),
        w.second('/health'),
      ]);
      assert.equal(a.status, 200);
      assert.equal(b.status, 200);
      assert.equal(c.status, 200);
      await c.text();
      assert.equal((await w.sql(`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`)).length, 1);
      assert.equal((await w.sql(`SELECT kid FROM signing_keys WHERE status = 'active'`)).length, 1);
      const key = await w.adminKey();
      // Both isolates accept the one key and sign with the one signing key.
      assert.equal((await call(w.url, 'GET', '/v1/cities/list', { token: key })).status, 200);
      const second = await w.second('/v1/cities/list', { headers: { authorization: `Bearer ${key}` } });
      assert.equal(second.status, 200);
      await second.text();
    } finally {
      await w.stop();
    }
  });
});

describe('Node server (the same checks)', () => {
  let g: TestGateway;
  before(async () => {
    g = await startGateway();
  });
  after(() => g?.stop());
  for (const [name, check] of Object.entries(conformance)) {
    test(name, () => check({ url: g.url, adminKey: g.adminKey }));
  }
});
