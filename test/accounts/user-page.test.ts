// Each city's users' page over HTTP (the browser half is test/userpage/): the /u/<city_id>/
// route and its headers, cities/page, the user_page setting's validation and turning the page
// off, payment/checkout's return_to back to the page, and usage/me/daily. One gateway, with the
// OpenAI and Stripe stubs.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { startStripeStub, type StripeStub } from '../stubs/stripe.ts';
import { startCreemStub, type CreemStub } from '../stubs/creem.ts';

const WHSEC = 'whsec_user_page';
let stub: OpenAIStub;
let stripe: StripeStub;
let creem: CreemStub;
const CREEM_WHSEC = 'creem_whsec_user_page';
const CREEM_PRODUCT = { id: 'prod_credits', price: 500, currency: 'USD', name: '5 USD of credits' };
let gw: TestGateway;
let admin: ReturnType<typeof client>;

before(async () => {
  [stub, stripe, creem] = await Promise.all([startOpenAIStub(), startStripeStub({ webhookSecret: WHSEC }), startCreemStub({ webhookSecret: CREEM_WHSEC, products: [CREEM_PRODUCT] })]);
  gw = await startGateway({
    env: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model',
      MODEL_PRICES: JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } }),
      USAGE_FLUSH_MS: '20',
      PAYMENT_A_SECRET_KEY: stripe.apiKey,
      PAYMENT_A_API_BASE: stripe.origin,
      PAYMENT_A_WEBHOOK_SECRET: WHSEC,
      PAYMENT_B_API_KEY: creem.apiKey,
      PAYMENT_B_PRODUCT_ID: CREEM_PRODUCT.id,
      PAYMENT_B_WEBHOOK_SECRET: CREEM_WHSEC,
      PAYMENT_B_API_BASE: creem.baseUrl,
    },
  });
  stripe.setWebhook(`${gw.url}/v1/payment/webhook/a`);
  creem.setWebhook(`${gw.url}/v1/payment/webhook/b`);
  admin = client(gw.url, gw.adminKey);
  for (const [city_id, name] of [['acme', 'Acme AI'], ['dark', 'Dark city'], ['plain', 'Plain']]) {
    assert.equal((await admin.post('/v1/cities/create', { city_id, name })).status, 200);
  }
});
after(async () => {
  await gw?.stop();
  await Promise.all([stub?.close(), stripe?.close(), creem?.close()]);
});

test('/u/<city>/ is served with the console headers; off, unknown and bad ids are one plain 404', async () => {
  const redirect = await fetch(`${gw.url}/u/acme`, { redirect: 'manual' });
  assert.equal(redirect.status, 308);
  assert.equal(redirect.headers.get('location'), '/u/acme/');
  const res = await fetch(`${gw.url}/u/acme/`);
  assert.equal(res.status, 200);
  const csp = res.headers.get('content-security-policy')!;
  assert.match(csp, /default-src 'self'/);
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /img-src 'self' data:;/);
  assert.equal(res.headers.get('x-frame-options'), 'DENY');
  const html = await res.text();
  const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]);
  assert.ok(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css')), html);
  for (const a of assets) assert.equal((await fetch(gw.url + a)).status, 200, a);

  for (const path of ['/u/nope/', '/u/nope', '/u/%3Cx%3E/', '/u/..%2f/']) {
    const r = await fetch(gw.url + path, { redirect: 'manual' });
    assert.equal(r.status, 404, path);
    assert.match(await r.text(), /This page is not available/);
  }
  assert.equal((await fetch(`${gw.url}/u/acme/extra`)).status, 404);

  // cities/page: the branding anyone may read; 404 in the one error shape when there is no page.
  const page = await client(gw.url).get('/v1/cities/page?city_id=acme');
  assert.equal(page.status, 200, page.text);
  assert.deepEqual(page.body, { city_id: 'acme', name: 'Acme AI', status: 'active', logo_url: null, accent_color: null });
  const none = await client(gw.url).get('/v1/cities/page?city_id=nope');
  assert.equal(none.status, 404);
  assert.equal(errorOf(none).code, 'page_not_available');
});

test('branding is validated: an https logo and a hex colour only; the CSP allows just the logo origin; a city can turn its page off', async () => {
  for (const [user_page, param] of [
    [{ logo_url: 'javascript:alert(1)' }, 'user_page.logo_url'],
    [{ logo_url: 'http://cdn.example.com/logo.png' }, 'user_page.logo_url'],
    [{ logo_url: 'data:image/svg+xml,<svg onload=alert(1)>' }, 'user_page.logo_url'],
    [{ logo_url: 'https://user:pw@cdn.example.com/l.png' }, 'user_page.logo_url'],
    // valid URLs whose host would break out of the CSP's img-src
    [{ logo_url: 'https://a;script-src/l.png' }, 'user_page.logo_url'],
    [{ logo_url: "https://a'b.example/l.png" }, 'user_page.logo_url'],
    [{ accent_color: 'red' }, 'user_page.accent_color'],
    [{ accent_color: '#12345' }, 'user_page.accent_color'],
    [{ accent_color: 'url(javascript:x)' }, 'user_page.accent_color'],
    [{ enabled: 'no' }, 'user_page.enabled'],
    [{ colour: '#fff' }, 'user_page.colour'],
  ] as const) {
    const r = await admin.post('/v1/cities/update', { city_id: 'dark', user_page });
    assert.equal(r.status, 400, `${JSON.stringify(user_page)}: ${r.text}`);
    assert.equal(errorOf(r).param, param, r.text);
  }
  const ok = await admin.post('/v1/cities/update', { city_id: 'dark', user_page: { logo_url: 'https://cdn.example.com/logo.png', accent_color: '#0F766E' } });
  assert.equal(ok.status, 200, ok.text);
  assert.deepEqual(ok.body.user_page, { enabled: true, logo_url: 'https://cdn.example.com/logo.png', accent_color: '#0f766e' });
  const res = await fetch(`${gw.url}/u/dark/`);
  assert.match(res.headers.get('content-security-policy')!, /img-src 'self' data: https:\/\/cdn\.example\.com;/);
  // Merged field by field: a colour change keeps the logo; null removes one.
  const c2 = await admin.post('/v1/cities/update', { city_id: 'dark', user_page: { accent_color: '#7c3aed' } });
  assert.equal(c2.body.user_page.logo_url, 'https://cdn.example.com/logo.png');
  const c3 = await admin.post('/v1/cities/update', { city_id: 'dark', user_page: { logo_url: null } });
  assert.deepEqual(c3.body.user_page, { enabled: true, logo_url: null, accent_color: '#7c3aed' });
  // Off: the page and cities/page answer as for no city; on again: back.
  assert.equal((await admin.post('/v1/cities/update', { city_id: 'plain', user_page: { enabled: false } })).status, 200);
  const off = await fetch(`${gw.url}/u/plain/`);
  assert.equal(off.status, 404);
  assert.match(await off.text(), /This page is not available/);
  assert.equal(errorOf(await client(gw.url).get('/v1/cities/page?city_id=plain')).code, 'page_not_available');
  assert.equal((await admin.post('/v1/cities/update', { city_id: 'plain', user_page: { enabled: true } })).status, 200);
  assert.equal((await fetch(`${gw.url}/u/plain/`)).status, 200);
  // A paused city keeps its page (it says so; signing in is refused); a removed one has none.
  assert.equal((await admin.post('/v1/cities/pause', { city_id: 'plain' })).status, 200);
  assert.equal((await fetch(`${gw.url}/u/plain/`)).status, 200);
  assert.equal((await client(gw.url).get('/v1/cities/page?city_id=plain')).body.status, 'paused');
  assert.equal(errorOf(await client(gw.url).post('/v1/accounts/login', { city_id: 'plain' })).code, 'city_paused');
  assert.equal((await admin.post('/v1/cities/activate', { city_id: 'plain' })).status, 200);
  assert.equal((await admin.post('/v1/cities/create', { city_id: 'gone', name: 'Gone' })).status, 200);
  assert.equal((await admin.post('/v1/cities/remove', { city_id: 'gone' })).status, 200);
  assert.equal((await fetch(`${gw.url}/u/gone/`)).status, 404);
  assert.equal(errorOf(await client(gw.url).get('/v1/cities/page?city_id=gone')).code, 'page_not_available');
  // A user token cannot change its city's page.
  const t = (await admin.post('/v1/cities/tokens/apply', { city_id: 'plain', user_id: 'u1' })).body.user_token;
  assert.equal((await client(gw.url, t).post('/v1/cities/update', { city_id: 'plain', user_page: { enabled: false } })).status, 403);
});

test('checkout with return_to: the buyer comes back to the page (303 with the payment status); never to another origin', async () => {
  const token = (await admin.post('/v1/accounts/login', { city_id: 'acme', user_id: 'buyer' })).body.user_token;
  const user = client(gw.url, token);
  const page = `${gw.url}/u/acme/`;
  for (const return_to of ['https://evil.example/u/acme/', 'javascript:alert(1)', '/u/acme/', `${gw.url.replace('127.0.0.1', 'localhost')}/u/acme/`]) {
    const r = await user.post('/v1/payment/checkout', { method: 'stripe', credits: 1_000_000, return_to });
    assert.equal(r.status, 400, `${return_to}: ${r.text}`);
    assert.deepEqual([errorOf(r).code, errorOf(r).param], ['return_to_not_allowed', 'return_to']);
  }
  const before = (await user.get('/v1/balance/me')).body.credits;
  const r = await user.post('/v1/payment/checkout', { method: 'stripe', credits: 2_000_000, return_to: page });
  assert.equal(r.status, 200, r.text);
  // The buyer pays on the provider's page; its signed webhook lands; the provider sends the buyer to the success page.
  const paid = await fetch(r.body.checkout_url, { method: 'POST', redirect: 'manual' });
  assert.equal(paid.status, 303);
  const success = paid.headers.get('location')!;
  assert.ok(success.startsWith(`${gw.url}/v1/payment/redirect/success?`), success);
  const back = await fetch(success, { redirect: 'manual' });
  assert.equal(back.status, 303);
  const to = new URL(back.headers.get('location')!);
  assert.equal(to.origin + to.pathname, page);
  assert.equal(to.searchParams.get('payment_id'), r.body.payment_id);
  assert.equal(to.searchParams.get('payment_status'), 'paid');
  assert.equal((await user.get('/v1/balance/me')).body.credits, before + 2_000_000);
  // Creem too: its success redirect keeps return_to (and adds its own signed parameters).
  const cb = (await user.get('/v1/balance/me')).body.credits;
  const cr = await user.post('/v1/payment/checkout', { method: 'creem', credits: 5_000_000, return_to: page });
  assert.equal(cr.status, 200, cr.text);
  const cpaid = await fetch(cr.body.checkout_url, { method: 'POST', redirect: 'manual' });
  assert.equal(cpaid.status, 303);
  const cback = await fetch(cpaid.headers.get('location')!, { redirect: 'manual' });
  assert.equal(cback.status, 303);
  const cto = new URL(cback.headers.get('location')!);
  assert.equal(cto.origin + cto.pathname, page);
  assert.equal(cto.searchParams.get('payment_status'), 'paid');
  assert.equal((await user.get('/v1/balance/me')).body.credits, cb + 5_000_000);
  // The cancel page too.
  const c = await user.post('/v1/payment/checkout', { method: 'stripe', credits: 1_000_000, return_to: `${page}?tab=1` });
  const cancelled = await fetch(c.body.checkout_url + '?action=cancel', { redirect: 'manual' });
  const cancelBack = await fetch(cancelled.headers.get('location')!, { redirect: 'manual' });
  assert.equal(cancelBack.status, 303);
  const back2 = new URL(cancelBack.headers.get('location')!);
  assert.equal(back2.pathname, '/u/acme/');
  assert.equal(back2.searchParams.get('tab'), '1');
  assert.equal(back2.searchParams.get('payment_status'), 'cancelled');
  // A forged result link never leads off the origin: it shows the plain page instead.
  for (const bad of ['//evil.example/x', '/\\evil.example/x', 'https://evil.example/', 'evil.example']) {
    for (const which of ['success', 'cancel']) {
      const res = await fetch(`${gw.url}/v1/payment/redirect/${which}?payment_id=${r.body.payment_id}&return_to=${encodeURIComponent(bad)}`, { redirect: 'manual' });
      assert.equal(res.status, 200, `${which} ${bad}`);
      assert.match(res.headers.get('content-type')!, /text\/html/);
    }
  }
});

test("usage/me/daily: the user's own calls and credits per UTC day; nobody else's", async () => {
  const login = async (user_id: string) => client(gw.url, (await admin.post('/v1/accounts/login', { city_id: 'acme', user_id })).body.user_token);
  const ann = await login('ann-daily');
  const bob = await login('bob-daily');
  await admin.post('/v1/balance/adjust', { city_id: 'acme', user_id: 'ann-daily', credits: 1_000_000, idempotency_key: 'ann-daily-grant', reason: 'test grant' });
  for (let i = 0; i < 3; i++) {
    const r = await ann.post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: `hello ${i}` }] });
    assert.equal(r.status, 200, r.text);
  }
  const records = await until('three records', async () => {
    const items = (await ann.get('/v1/usage/me')).body.items as { credits: number; status: string }[];
    return items.length === 3 ? items : null;
  }, 10_000);
  const d = await ann.get('/v1/usage/me/daily?days=7');
  assert.equal(d.status, 200, d.text);
  const today = new Date().toISOString().slice(0, 10);
  assert.equal(d.body.to, today);
  assert.equal(d.body.from, new Date(Date.now() - 6 * 86_400_000).toISOString().slice(0, 10));
  assert.equal(d.body.items.length, 1);
  assert.deepEqual(
    { day: d.body.items[0].day, calls: d.body.items[0].calls, errors: d.body.items[0].errors, credits: d.body.items[0].credits },
    { day: today, calls: 3, errors: 0, credits: records.reduce((s, r) => s + r.credits, 0) },
  );
  assert.ok(d.body.items[0].credits > 0);
  assert.deepEqual((await bob.get('/v1/usage/me/daily')).body.items, []);
  // One key's calls only (the page's key filter).
  const made = await ann.post('/v1/accounts/keys/create', { name: 'daily key' });
  assert.equal(made.status, 200, made.text);
  const byKey = client(gw.url, made.body.secret);
  assert.equal((await byKey.post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'with the key' }] })).status, 200);
  await until('the key call recorded', async () => (await ann.get('/v1/usage/me')).body.items.length === 4, 10_000);
  for (const key_id of [made.body.key.id, made.body.key.prefix]) {
    const k = await ann.get(`/v1/usage/me/daily?key_id=${key_id}`);
    assert.equal(k.status, 200, k.text);
    assert.equal(k.body.items[0].calls, 1);
  }
  assert.equal((await ann.get('/v1/usage/me/daily')).body.items[0].calls, 4);
  assert.equal(errorOf(await ann.get('/v1/usage/me/daily?key_id=nope')).param, 'key_id');
  for (const days of ['0', '91', 'x']) {
    const bad = await ann.get(`/v1/usage/me/daily?days=${days}`);
    assert.equal(bad.status, 400, days);
    assert.equal(errorOf(bad).param, 'days');
  }
  assert.equal((await client(gw.url).get('/v1/usage/me/daily')).status, 401);
  assert.equal((await admin.get('/v1/usage/me/daily')).status, 403);
});
