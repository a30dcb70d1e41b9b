// The admin console on the edge: Cloudflare serves console/dist as the Worker's static assets
// (what `citygate deploy` uploads) before the Worker runs; everything else reaches the Worker.
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { after, before, test } from 'node:test';
import WebSocket from 'ws';
import { startWorker, type TestWorker } from '../helpers/worker.ts';

const DIST = resolve(import.meta.dirname, '../../console/dist');
let w: TestWorker;
let bare: TestWorker;

before(async () => {
  w = await startWorker({ assets: DIST });
  bare = await startWorker();
});
after(async () => {
  await w?.stop();
  await bare?.stop();
});

test('/console on the Worker: the index, its script and style come from the static assets', async () => {
  const redirect = await fetch(`${w.url}/console`, { redirect: 'manual' });
  assert.ok([301, 307, 308].includes(redirect.status), String(redirect.status));
  assert.equal(new URL(redirect.headers.get('location')!, w.url).pathname, '/console/');
  const index = await fetch(`${w.url}/console/`);
  assert.equal(index.status, 200);
  assert.match(index.headers.get('content-type')!, /text\/html/);
  // The same headers as on Node, from console/dist/_headers.
  assert.match(index.headers.get('content-security-policy')!, /default-src 'self'/);
  const html = await index.text();
  assert.match(html, /<div id="app"><\/div>/);
  const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]);
  const js = assets.find((a) => a.endsWith('.js'));
  assert.ok(js && assets.some((a) => a.endsWith('.css')), html);
  const script = await fetch(w.url + js);
  assert.equal(script.status, 200);
  assert.match(script.headers.get('content-type')!, /javascript/);
  // The console's code (its shared chunk with the users' page included) is all there.
  const code = await Promise.all(assets.filter((a) => a.endsWith('.js')).map(async (a) => (await fetch(w.url + a)).text()));
  assert.match(code.join('\n'), /citygate\.console\.key/);
});

test('the API is still the Worker’s: /health, /v1, and a missing console file is the gateway’s 404', async () => {
  assert.deepEqual((await (await fetch(`${w.url}/health`)).json()).ok, true);
  const key = await w.adminKey();
  const cities = await fetch(`${w.url}/v1/cities/list`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(cities.status, 200);
  const missing = await fetch(`${w.url}/console/assets/missing.js`);
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).error.code, 'route_not_found');
});

test('a Worker deployed without the assets says how to get the console', async () => {
  const res = await fetch(`${bare.url}/console/`);
  assert.equal(res.status, 503);
  assert.match(await res.text(), /npm run build:console/);
});

test('Responses over WebSocket is refused on the Worker (405 websocket_not_supported), so clients fall back to HTTP', async () => {
  for (const path of ['/v1/responses', '/v1/ai/responses']) {
    // the ws client, as the openai client's ResponsesWS and Codex's would connect
    const refused = await new Promise<{ status?: number; allow?: string; body: string }>((resolve, reject) => {
      const ws = new WebSocket(`${bare.url.replace(/^http/, 'ws')}${path}`, { headers: { authorization: 'Bearer x' } });
      ws.once('open', () => reject(new Error('upgraded')));
      ws.once('unexpected-response', (_q, res) => {
        let body = '';
        res.on('data', (c) => (body += c)).on('end', () => resolve({ status: res.statusCode, allow: res.headers.allow, body }));
      });
    });
    assert.deepEqual([refused.status, refused.allow, JSON.parse(refused.body).error.code], [405, 'POST', 'websocket_not_supported'], path);
  }
});

test("a city's users' page on the Worker: /u/<city>/ reads users.html through the ASSETS binding, with the console's headers", async () => {
  const key = await w.adminKey();
  const created = await fetch(`${w.url}/v1/cities/create`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ city_id: 'edge-shop', name: 'Edge shop' }),
  });
  assert.equal(created.status, 200, await created.text());
  const res = await fetch(`${w.url}/u/edge-shop/`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type')!, /text\/html/);
  assert.match(res.headers.get('content-security-policy')!, /default-src 'self'/);
  const html = await res.text();
  const js = [...html.matchAll(/src="(\/console\/assets\/[^"]+\.js)"/g)].map((m) => m[1])[0];
  assert.ok(js, html);
  assert.equal((await fetch(w.url + js)).status, 200);
  assert.equal((await fetch(`${w.url}/u/nope/`)).status, 404);
  const page = await (await fetch(`${w.url}/v1/cities/page?city_id=edge-shop`)).json();
  assert.equal(page.name, 'Edge shop');
});
