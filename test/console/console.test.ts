// The admin console at /console, in Debian's chromium, against a real gateway whose text
// provider is the OpenAI stub: what an operator does and sees, page by page. Every request the
// page makes is recorded: none may leave the gateway's origin. Screenshots of every page at
// 1280 px and at phone size go to test-results/console/.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { startStripeStub, type StripeStub } from '../stubs/stripe.ts';
import { consolePages, DESKTOP, PHONE } from './pages.ts';

// stub-model costs 1 credit per token in and 2 per token out.
const PRICES = JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } });

browserSuite('the admin console in chromium', () => {
  let stub: OpenAIStub;
  let stripe: StripeStub;
  let gw: TestGateway;
  let browser: Browser;
  let admin: ReturnType<typeof client>;
  let bureauToken = '';

  const { outside, pageErrors, open, signIn, shot, gotoPage } = consolePages(() => ({ url: gw.url, browser }));

  before(async () => {
    stub = await startOpenAIStub();
    // Stripe without a webhook: a payment stays pending until someone syncs it.
    stripe = await startStripeStub();
    gw = await startGateway({
      env: {
        TEXTPROVIDER_API_KEY: 'sk-stub',
        TEXTPROVIDER_BASE_URL: stub.url,
        TEXTPROVIDER_MODELS: 'stub-model',
        MODEL_PRICES: PRICES,
        USAGE_FLUSH_MS: '20',
        PAYMENT_A_SECRET_KEY: stripe.apiKey,
        PAYMENT_A_API_BASE: stripe.origin,
      },
    });
    admin = client(gw.url, gw.adminKey);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await gw?.stop();
    await stub?.close();
    await stripe?.close();
  });

  test('/console is served by the gateway: the page, its script and style, strict headers', async () => {
    const res = await fetch(`${gw.url}/console`, { redirect: 'manual' });
    assert.equal(res.status, 308);
    assert.equal(res.headers.get('location'), '/console/');
    const index = await fetch(`${gw.url}/console/`);
    assert.equal(index.status, 200);
    assert.match(index.headers.get('content-type')!, /text\/html/);
    assert.match(index.headers.get('content-security-policy')!, /default-src 'self'/);
    const html = await index.text();
    const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]);
    assert.ok(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css')), html);
    for (const a of assets) {
      const r = await fetch(gw.url + a);
      assert.equal(r.status, 200, a);
      assert.match(r.headers.get('cache-control')!, /immutable/);
    }
    assert.equal((await fetch(`${gw.url}/console/assets/nope.js`)).status, 404);
    assert.equal((await fetch(`${gw.url}/console/..%2f..%2fpackage.json`)).status, 404);
  });

  test('the operator signs in with the admin key, which stays in sessionStorage only', async () => {
    const { ctx, page } = await open();
    await page.goto(`${gw.url}/console`);
    await shot(page, 'signin-1280');
    await page.getByLabel('Admin key or bureau token').fill('cg_admin_wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: /401/ }).waitFor();
    // A user token is not a console credential: said in words.
    await admin.post('/v1/cities/create', { name: 'Sign-in check', city_id: 'signin-check' });
    const userToken = (await admin.post('/v1/cities/tokens/apply', { city_id: 'signin-check', user_id: 'u' })).body.user_token;
    await page.getByLabel('Admin key or bureau token').fill(userToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'a user token cannot open the console' }).waitFor();
    await admin.post('/v1/cities/remove', { city_id: 'signin-check' });
    // Signing in with the right key logs nothing at all in the browser console (no refused probe).
    const logged: string[] = [];
    page.on('console', (m) => void (m.type() === 'error' && logged.push(m.text())));
    await signIn(page, gw.adminKey);
    await page.getByTestId('total-calls').waitFor();
    assert.deepEqual(logged, []);
    assert.equal(await page.getByTestId('whoami').innerText(), 'Admin');
    const storage = await page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length, cookie: document.cookie, url: location.href }));
    assert.equal(storage.session, 1);
    assert.equal(storage.local, 0);
    assert.equal(storage.cookie, '');
    assert.ok(!storage.url.includes(gw.adminKey));
    // A reload keeps the session (same tab); a new tab (context) starts signed out.
    await page.reload();
    await page.getByRole('navigation', { name: 'Pages' }).waitFor();
    const other = await open();
    await other.page.goto(`${gw.url}/console`);
    await other.page.getByLabel('Admin key or bureau token').waitFor();
    await other.ctx.close();
    await ctx.close();
  });

  test('create a city, issue a user token (copy button), which works against /v1', async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'cities');
    await page.getByText('No cities yet').waitFor();
    await page.getByLabel('City name').fill('Demo product');
    await page.getByLabel('City id (optional)').fill('demo');
    await page.getByRole('button', { name: 'Create city' }).click();
    const row = page.locator('tr[data-city="demo"]');
    await row.waitFor();
    assert.match(await row.innerText(), /Demo product[\s\S]*active/);
    // A duplicate id shows the gateway's message.
    await page.getByLabel('City name').fill('Again');
    await page.getByLabel('City id (optional)').fill('demo');
    await page.getByRole('button', { name: 'Create city' }).click();
    await page.getByRole('alert').filter({ hasText: "The city id 'demo' is taken." }).waitFor();

    await row.getByRole('button', { name: 'Token…' }).click();
    await page.getByLabel('User id for a token of demo').fill('alice');
    await page.getByRole('button', { name: 'Issue user token' }).click();
    const token = await page.getByTestId('one-time-secret').innerText();
    assert.match(token, /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), token);
    const me = await client(gw.url, token).get('/v1/balance/me');
    assert.equal(me.status, 200);
    assert.equal(me.body.user_id, 'alice');
    await shot(page, 'flow-token-issued-1280');
    await ctx.close();
  });

  test("adjusting a user's balance with a double click changes it once", async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'users?city=demo&user=alice');
    await page.getByTestId('balance').filter({ hasText: /^0$/ }).waitFor();
    await page.getByLabel('Credits (negative to take)').fill('5000000');
    await page.getByLabel('Reason').fill('welcome');
    await page.getByRole('button', { name: 'Apply adjustment' }).dblclick();
    await page.getByTestId('balance').filter({ hasText: '5,000,000' }).waitFor();
    await page.getByRole('status').filter({ hasText: /balance 5,000,000/i }).first().waitFor();
    // A late second click (after the answer came) sends the same key: nothing changes.
    await page.getByRole('button', { name: 'Apply adjustment' }).click();
    await page.getByRole('status').filter({ hasText: 'Already applied' }).waitFor();
    const ledger = page.getByTestId('ledger').locator('tbody tr');
    await until('one ledger row', async () => (await ledger.count()) === 1);
    // What the gateway holds: one adjustment, and the balance once.
    const got = await admin.get('/v1/balance/get?city_id=demo&user_id=alice');
    assert.equal(got.body.credits, 5_000_000);
    const entries = await admin.get('/v1/balance/ledger?city_id=demo&user_id=alice');
    assert.equal(entries.body.items.filter((e: { kind: string }) => e.kind === 'adjust').length, 1);
    // A double submit that beats the button's busy state (Enter pressed twice while the first
    // request is still on its way): two requests, one idempotency key, one change.
    const sent: { idempotency_key: string; credits: number }[] = [];
    const answers: { replayed: boolean }[] = [];
    page.on('request', (r) => void (r.url().endsWith('/v1/balance/adjust') && sent.push(r.postDataJSON())));
    page.on('response', async (r) => void (r.url().endsWith('/v1/balance/adjust') && answers.push(await r.json())));
    // the first request reaches the gateway first (it applies), but its answer comes back last,
    // as a loaded network may order them. Ordered by events, not timers: the second request
    // leaves only once the first has been applied, and the first answer is let through only
    // once the second has come back.
    let nth = 0;
    let firstApplied!: () => void;
    const applied = new Promise<void>((ok) => (firstApplied = ok));
    await page.route('**/v1/balance/adjust', async (route) => {
      if (nth++ > 0) return applied.then(() => route.continue());
      const res = await route.fetch();
      firstApplied();
      await until('the second answer', () => answers.length === 1);
      await route.fulfill({ response: res });
    });
    await page.getByLabel('Credits (negative to take)').fill('1000000');
    await page.getByLabel('Reason').fill('bonus');
    await page.getByLabel('Reason').press('Enter');
    await page.getByLabel('Reason').press('Enter');
    await page.getByTestId('balance').filter({ hasText: '6,000,000' }).waitFor();
    // one answer applied it, the other found it applied; the form shows the last to come back
    await until('both answers', () => answers.length === 2);
    assert.deepEqual(answers.map((a) => a.replayed), [true, false]);
    await page.getByRole('status').filter({ hasText: 'Added 1,000,000 credits' }).waitFor();
    assert.equal(sent.length, 2);
    assert.equal(sent[0].idempotency_key, sent[1].idempotency_key);
    assert.equal((await admin.get('/v1/balance/get?city_id=demo&user_id=alice')).body.credits, 6_000_000);
    await page.unroute('**/v1/balance/adjust');
    // Taking more than the balance is refused with the gateway's message, and changes nothing.
    await page.getByLabel('Credits (negative to take)').fill('-9000000');
    await page.getByRole('button', { name: 'Apply adjustment' }).click();
    await page.getByRole('alert').filter({ hasText: 'cannot go below zero' }).waitFor();
    assert.equal((await admin.get('/v1/balance/get?city_id=demo&user_id=alice')).body.credits, 6_000_000);
    await shot(page, 'flow-balance-adjusted-1280');
    await ctx.close();
  });

  test('a chat in the playground streams an answer with tokens, credits and overhead, then shows on the overview and in usage', async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'playground');
    await page.getByLabel('City').selectOption('demo');
    await page.getByLabel('As user').fill('alice');
    await page.getByLabel('Model').selectOption('stub-model');
    await page.getByLabel('Message').fill('tell me four words');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByTestId('answer').filter({ hasText: 'Hello from stub: tell me four words' }).waitFor();
    // prompt: 4 words + 3 = 7 tokens; reply "Hello from stub: tell me four words", 7 words:
    // 7 × 1 + 7 × 2 = 21 credits.
    await page.getByTestId('tokens').filter({ hasText: '7 / 7' }).waitFor();
    await page.getByTestId('credits').filter({ hasText: /^21$/ }).waitFor();
    assert.match(await page.getByTestId('overhead').innerText(), /^\d+(\.\d+)? ms$/);
    assert.equal(stub.requests.filter((r) => r.path === '/v1/chat/completions').length, 1);
    assert.equal((stub.requests[0].body as { stream?: boolean }).stream, true);
    await shot(page, 'flow-playground-answer-1280');

    await gotoPage(page, 'overview');
    await page.getByTestId('total-calls').filter({ hasText: /^1$/ }).waitFor();
    const chart = page.locator('.chart').first();
    await chart.locator('canvas').waitFor();
    assert.match(await chart.innerText(), /Calls per day by city[\s\S]*demo/);
    const byCity = page.locator('section', { has: page.getByRole('heading', { name: 'By city' }) });
    assert.match(await byCity.locator('tbody tr').first().innerText(), /demo\s+1\s+0\s+7 \/ 7\s+21\s+\d+(\.\d+)? ms/);
    await shot(page, 'flow-overview-after-chat-1280');

    await gotoPage(page, 'usage');
    const rows = page.getByTestId('usage-table').locator('tbody tr');
    await rows.first().waitFor();
    assert.equal(await rows.count(), 1);
    assert.match(await rows.first().innerText(), /demo \/ alice[\s\S]*stub-model[\s\S]*ok[\s\S]*7 \/ 7[\s\S]*21/);
    // Filters: another user has nothing.
    await page.getByLabel('User').fill('nobody');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No usage records match these filters').waitFor();
    await page.getByRole('button', { name: 'Clear' }).click();
    await rows.first().waitFor();
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    const csv = readFileSync((await download.path())!, 'utf8').trim().split('\r\n');
    assert.equal(csv.length, 2);
    assert.match(csv[0], /^created_at,request_id,city_id,user_id,model/);
    // tokens in, out, cache read, cache write, its 1-hour share, images, seconds, then credits
    assert.match(csv[1], /,demo,alice,stub-model,compat,ok,,7,7,0,0,0,0,0,21,/);
    await shot(page, 'flow-usage-after-chat-1280');
    await ctx.close();
  });

  test('a paused city: the playground is refused with the gateway’s message (after a confirm)', async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'cities');
    const row = page.locator('tr[data-city="demo"]');
    await row.getByRole('button', { name: 'Pause' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText('Pause Demo product?').waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await admin.get('/v1/cities/get?city_id=demo')).body.status, 'active', 'cancel changes nothing');
    await row.getByRole('button', { name: 'Pause' }).click();
    await dialog.getByRole('button', { name: 'Pause' }).click();
    await row.getByText('paused').waitFor();
    assert.equal((await admin.get('/v1/cities/get?city_id=demo')).body.status, 'paused');

    const before = stub.requests.length;
    await gotoPage(page, 'playground');
    await page.getByLabel('City').selectOption('demo');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByRole('alert').filter({ hasText: /paused/ }).waitFor();
    assert.equal(stub.requests.length, before, 'nothing reached the upstream');
    await shot(page, 'flow-playground-paused-1280');

    await gotoPage(page, 'cities');
    await row.getByRole('button', { name: 'Activate' }).click();
    await row.getByText('active').waitFor();
    await ctx.close();
  });

  test('a bureau token sees only its own city', async () => {
    await admin.post('/v1/cities/create', { name: 'Other product', city_id: 'other' });
    const otherToken = (await admin.post('/v1/cities/tokens/apply', { city_id: 'other', user_id: 'olga' })).body.user_token;
    await client(gw.url, otherToken).post('/v1/ai/chat/completions', { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] });

    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'bureaus');
    await page.getByLabel('City').selectOption('demo');
    await page.getByLabel('Bureau name').fill('demo backend');
    await page.getByRole('button', { name: 'Create bureau' }).click();
    bureauToken = await page.getByTestId('one-time-secret').innerText();
    assert.match(bureauToken, /^cg_bureau_/);
    await ctx.close();

    const b = await open();
    await signIn(b.page, bureauToken);
    assert.equal(await b.page.getByTestId('whoami').innerText(), 'Bureau of demo');
    const nav = await b.page.getByRole('navigation', { name: 'Pages' }).innerText();
    assert.doesNotMatch(nav, /Env|Bureaus/);
    await gotoPage(b.page, 'cities');
    await b.page.locator('tr[data-city="demo"]').waitFor();
    assert.equal(await b.page.locator('tr[data-city]').count(), 1);
    assert.equal(await b.page.getByRole('button', { name: 'Pause' }).count(), 0, 'a bureau cannot pause');
    await gotoPage(b.page, 'usage');
    await b.page.getByTestId('usage-table').locator('tbody tr').first().waitFor();
    const text = await b.page.getByTestId('usage-table').innerText();
    assert.match(text, /demo \/ alice/);
    assert.doesNotMatch(text, /other/);
    assert.deepEqual(await b.page.getByLabel('City').locator('option').allInnerTexts(), ['All', 'demo']);
    await gotoPage(b.page, 'overview');
    await b.page.getByTestId('total-calls').filter({ hasText: /^1$/ }).waitFor(); // other's call is not counted
    await shot(b.page, 'flow-bureau-overview-1280');
    // The env page is not there for a bureau, and the API refuses it anyway.
    await b.page.goto(`${gw.url}/console/#/env`);
    await b.page.getByRole('alert').filter({ hasText: "No page 'env'" }).waitFor();
    await b.ctx.close();
  });

  test('payments: status, provider and amount; a payment whose webhook never came is synced with its provider', async () => {
    const alice = client(gw.url, (await admin.post('/v1/cities/tokens/apply', { city_id: 'demo', user_id: 'alice' })).body.user_token);
    const checkout = await alice.post('/v1/payment/checkout', { method: 'stripe', credits: 2_000_000 });
    assert.equal(checkout.status, 200, checkout.text);
    const before = (await admin.get('/v1/balance/get?city_id=demo&user_id=alice')).body.credits;

    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'payments');
    const row = page.locator('tr', { hasText: checkout.body.payment_id });
    await row.waitFor();
    assert.match(await row.innerText(), /demo \/ alice\s+stripe\s+pending\s+\$2\.00\s+2,000,000/);
    // The buyer paid at Stripe; the webhook was lost. Sync asks Stripe and credits the payment once.
    stripe.completeSession([...stripe.sessions.keys()].at(-1)!);
    await row.getByRole('button', { name: 'Sync' }).click();
    await row.getByText('paid').waitFor();
    assert.equal(await row.getByRole('button', { name: 'Sync' }).count(), 0);
    assert.equal((await admin.get('/v1/balance/get?city_id=demo&user_id=alice')).body.credits, before + 2_000_000);
    await ctx.close();
  });

  test('every page at 1280 px and at phone size: no secret shown, nothing loaded from elsewhere, no page errors', async () => {
    await admin.post('/v1/env/upsert', { key: 'PAYMENT_A_SECRET_KEY', value: 'sk_test_console_secret_value_123456' });
    const pages = ['overview', 'cities', 'users?city=demo&user=alice', 'payments', 'usage', 'models', 'env', 'bureaus', 'playground'];
    for (const [label, viewport] of [['1280', DESKTOP], ['phone', PHONE]] as const) {
      const { ctx, page } = await open(viewport);
      await signIn(page, gw.adminKey);
      for (const p of pages) {
        await gotoPage(page, p);
        const name = p.split('?')[0];
        await shot(page, `${name}-${label}`);
        const text = await page.locator('body').innerText();
        assert.ok(!text.includes(gw.adminKey), `${p}: the admin key is on the page`);
        assert.ok(!text.includes('sk_test_console_secret_value_123456'), `${p}: a secret env value is on the page`);
        assert.ok(!text.includes(bureauToken), `${p}: the bureau token is on the page`);
        // Nothing wider than the screen but tables, which scroll in their own box.
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
        assert.ok(overflow <= 1, `${p} at ${label}: the page scrolls sideways by ${overflow} px`);
      }
      // Keyboard focus is visible: tabbing to a link draws an outline.
      await page.keyboard.press('Tab');
      const outline = await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle);
      assert.notEqual(outline, 'none');
      await ctx.close();
    }
    const env = await open();
    await signIn(env.page, gw.adminKey);
    await gotoPage(env.page, 'env');
    assert.match(await env.page.getByTestId('env').innerText(), /PAYMENT_A_SECRET_KEY\s+••••••••3456/);
    await env.ctx.close();
    assert.deepEqual(outside, [], 'requests to other origins');
    assert.deepEqual(pageErrors, [], 'page errors');
  });
});
