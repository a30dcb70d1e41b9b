// Each city's users' page (/u/<city_id>/) in Debian's chromium, against one real gateway whose
// text provider is the OpenAI stub, Stripe is the Stripe stub (its hosted checkout's Pay
// button delivers the signed webhook) and GitHub login is the GitHub stub. What a user does and
// sees: sign in, buy credits, make a key and copy it, watch a call made with it arrive.
// Screenshots at 1280 px and 375 px go where the console's go (test-results/console/).
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startGitHubStub, type GitHubStub } from '../stubs/github.ts';
import { startGoogleStub, type GoogleStub } from '../stubs/google.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { signStripePayload, startStripeStub, type StripeStub } from '../stubs/stripe.ts';
import { SHOTS } from '../console/pages.ts';

const PRICES = JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } });
const WHSEC = 'whsec_userpage_test';
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 375, height: 812 };
// Names a user or admin types, rendered as text everywhere (never as markup).
const EVIL_NAME = '<img src=x onerror="window.__pwned=1">Ann';
const EVIL_KEY = '<b>laptop</b> claude "x" <script>window.__pwned=2</script>';
// The city's logo: an https origin the browser is allowed to load images from (answered by the test).
const LOGO_URL = 'https://cdn.example.com/logo.svg';
const LOGO_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><rect width="64" height="64" rx="14" fill="#7c3aed"/><text x="32" y="43" font-size="30" text-anchor="middle" fill="#fff" font-family="sans-serif">D</text></svg>';

browserSuite("the users' page in chromium", () => {
  let stub: OpenAIStub;
  let stripe: StripeStub;
  let gh: GitHubStub;
  let gg: GoogleStub;
  let gw: TestGateway;
  let browser: Browser;
  let admin: ReturnType<typeof client>;
  const outside: string[] = [];
  const pageErrors: string[] = [];
  let allowedNav: Set<string>;

  before(async () => {
    [stub, stripe, gh, gg] = await Promise.all([startOpenAIStub(), startStripeStub({ webhookSecret: WHSEC }), startGitHubStub(), startGoogleStub()]);
    gw = await startGateway({
      env: {
        TEXTPROVIDER_API_KEY: 'sk-stub',
        TEXTPROVIDER_BASE_URL: stub.url,
        TEXTPROVIDER_MODELS: 'stub-model',
        MODEL_PRICES: PRICES,
        USAGE_FLUSH_MS: '20',
        PAYMENT_A_SECRET_KEY: stripe.apiKey,
        PAYMENT_A_API_BASE: stripe.origin,
        PAYMENT_A_WEBHOOK_SECRET: WHSEC,
        OAUTH_A_CLIENT_ID: gh.clientId,
        OAUTH_A_CLIENT_SECRET: gh.clientSecret,
        OAUTH_A_AUTHORIZE_URL: gh.authorizeUrl,
        OAUTH_A_TOKEN_URL: gh.tokenUrl,
        OAUTH_A_API_URL: gh.apiBase,
        OAUTH_B_CLIENT_ID: gg.clientId,
        OAUTH_B_CLIENT_SECRET: gg.clientSecret,
        OAUTH_B_AUTHORIZE_URL: gg.authorizeUrl,
        OAUTH_B_TOKEN_URL: gg.tokenUrl,
        OAUTH_B_USERINFO_URL: gg.userinfoUrl,
      },
    });
    stripe.setWebhook(`${gw.url}/v1/payment/webhook/a`);
    gh.setRedirectUri(`${gw.url}/v1/accounts/oauth/callback`);
    gg.setRedirectUri(`${gw.url}/v1/accounts/oauth/callback`);
    admin = client(gw.url, gw.adminKey);
    for (const [city_id, name] of [['acme', 'Acme AI'], ['dark', 'Dark city']]) {
      assert.equal((await admin.post('/v1/cities/create', { city_id, name })).status, 200);
    }
    const branded = await admin.post('/v1/cities/update', { city_id: 'dark', user_page: { logo_url: LOGO_URL, accent_color: '#7c3aed' } });
    assert.equal(branded.status, 200, branded.text);
    allowedNav = new Set([new URL(stripe.origin).origin, new URL(gh.authorizeUrl).origin, new URL(gg.authorizeUrl).origin]);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await gw?.stop();
    await Promise.all([stub?.close(), stripe?.close(), gh?.close(), gg?.close()]);
  });

  async function open(viewport = DESKTOP): Promise<{ ctx: BrowserContext; page: Page }> {
    const ctx = await browser.newContext({ viewport });
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.url });
    const page = await ctx.newPage();
    await page.route(LOGO_URL, (r) => r.fulfill({ status: 200, contentType: 'image/svg+xml', body: LOGO_SVG }));
    const origin = new URL(gw.url).origin;
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.protocol === 'data:' || u.protocol === 'blob:' || u.origin === origin || r.url() === LOGO_URL) return;
      // The provider's pages (checkout, sign-in) are top-level navigations the user makes.
      if (r.isNavigationRequest() && allowedNav.has(u.origin)) return;
      outside.push(r.url());
    });
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => {
      if (m.type() === 'error' && !/Failed to load resource: the server responded with a status of (4\d\d)/.test(m.text())) pageErrors.push(m.text());
    });
    return { ctx, page };
  }

  /** A full-page shot from the top; a modal is shot as the screen shows it (its backdrop covers the viewport only). */
  async function shot(page: Page, name: string, fullPage = true) {
    mkdirSync(SHOTS, { recursive: true });
    await page.waitForLoadState('networkidle');
    await page.locator('[aria-busy="true"]').first().waitFor({ state: 'detached', timeout: 10_000 }).catch(() => {});
    if (fullPage) await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage });
  }

  /** No sideways scrolling: the page fits its viewport. */
  async function fits(page: Page) {
    const { scroll, client: width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    assert.ok(scroll <= width + 1, `page is ${scroll}px wide in a ${width}px viewport`);
  }

  const credits = async (page: Page) => Number((await page.getByTestId('balance-credits').innerText()).replace(/[^0-9-]/g, ''));

  test("the admin brands a city in the console (Cities → Users' page…): the API's refusal shown, then saved", async () => {
    const { ctx, page } = await open(DESKTOP);
    await page.goto(`${gw.url}/console`);
    await page.getByLabel('Admin key or bureau token').fill(gw.adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.goto(`${gw.url}/console/#/cities`);
    const row = page.locator('tr[data-city="acme"]');
    await row.getByRole('button', { name: "Users' page…" }).click();
    const form = page.getByRole('form', { name: "Users' page of acme" });
    await form.getByLabel('Logo URL (https)').fill('http://cdn.example.com/logo.png');
    await form.getByRole('button', { name: 'Save the page' }).click();
    await form.getByRole('alert').filter({ hasText: 'https://' }).waitFor();
    await form.getByLabel('Logo URL (https)').fill('');
    await form.getByLabel('Accent colour', { exact: true }).fill('#0f766e');
    await form.getByRole('button', { name: 'Save the page' }).click();
    await form.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
    assert.equal(await form.getByRole('link', { name: '/u/acme/' }).getAttribute('href'), '/u/acme/');
    const p = (await client(gw.url).get('/v1/cities/page?city_id=acme')).body;
    assert.deepEqual([p.logo_url, p.accent_color], [null, '#0f766e']);
    await ctx.close();
  });

  test('a user signs in (local login), buys credits through Stripe, makes a key, copies it, and sees its call within 5 s', async () => {
    const { ctx, page } = await open(DESKTOP);
    await page.goto(`${gw.url}/u/acme/`);
    await page.getByTestId('city-name').filter({ hasText: 'Acme AI' }).waitFor();
    await page.getByRole('button', { name: 'Continue with GitHub' }).waitFor();
    await shot(page, 'userpage-signin-1280');
    await page.getByLabel('Your name (optional)').fill(EVIL_NAME);
    await page.getByRole('button', { name: 'Sign in with local login' }).click();
    await page.getByTestId('balance-credits').filter({ hasText: /\d/ }).waitFor();
    assert.equal(await page.getByTestId('signed-in-as').innerText(), EVIL_NAME);
    const storage = await page.evaluate(() => ({ session: Object.keys(sessionStorage), local: localStorage.length, cookie: document.cookie }));
    assert.deepEqual(storage.session, ['citygate.user.acme']);
    assert.equal(storage.local, 0);
    assert.equal(storage.cookie, '');
    const token = await page.evaluate(() => sessionStorage.getItem('citygate.user.acme')!);
    const user = client(gw.url, token);
    const before = await credits(page);
    assert.equal(before, (await user.get('/v1/balance/me')).body.credits);

    // Buy $10 with Stripe: the stub's hosted checkout, Pay (the signed webhook lands), back here.
    await page.getByRole('button', { name: 'Pay with Stripe' }).click();
    await page.waitForURL((u) => u.origin === new URL(stripe.origin).origin);
    await page.locator('#pay').click();
    await page.waitForURL((u) => u.pathname === '/u/acme/');
    await page.getByTestId('payment-notice').waitFor();
    assert.match(await page.getByTestId('payment-notice').innerText(), /went through/);
    await until('the new balance on the page', async () => (await credits(page)) === before + 10_000_000, 10_000);
    assert.equal(stripe.deliveries.length, 1);
    assert.equal(stripe.deliveries[0].status, 200);
    assert.equal(new URL(page.url()).search, '', 'the payment parameters are gone from the address bar');
    await page.getByText('Your last payments').click();
    assert.match(await page.locator('.payments li').first().innerText(), /paid\s+10,000,000 credits · \$10\.00 · stripe/);

    // A key: the copy-once dialog, the clipboard holds what the dialog shows.
    await page.getByText('New key…').click();
    await page.getByLabel('Name').fill(EVIL_KEY);
    await page.getByLabel('Models (optional)').fill('stub-model');
    await page.getByLabel('Budget in credits (optional)').fill('20000');
    await page.getByLabel('Budget period').selectOption('week');
    await page.getByRole('button', { name: 'Create key' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    const secret = await page.getByTestId('new-key-secret').inputValue();
    assert.match(secret, /^cg_key_[a-z0-9]{12}_[A-Za-z0-9]{40}$/);
    await shot(page, 'userpage-key-dialog-1280', false);
    await dialog.getByRole('button', { name: 'Copy', exact: true }).click();
    await dialog.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
    await dialog.getByRole('button', { name: 'I have copied it' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.getByTestId('new-key-secret').waitFor({ state: 'detached', timeout: 5000 }); // the secret is gone once the dialog closes
    const item = page.getByTestId('key-list').locator('li').first();
    assert.equal(await item.locator('.key-name').innerText(), EVIL_KEY);
    assert.match(await item.innerText(), /0 \/ 20,000 per week/);
    assert.ok(!(await page.content()).includes(secret), 'the secret is not on the page any more');

    // A call with the key (an agent, outside the browser) shows in the usage list within 5 s.
    const called = Date.now();
    const res = await fetch(`${gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hello from the key' }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    await res.json();
    const row = page.getByTestId('usage-table').locator('tbody tr').first();
    await row.filter({ hasText: 'stub-model' }).waitFor({ timeout: 5000 });
    assert.ok(Date.now() - called <= 5000, `the call showed after ${Date.now() - called} ms`);
    const text = await row.innerText();
    assert.match(text, /stub-model/);
    assert.ok(text.includes(EVIL_KEY), `the key's name in the row: ${text}`);
    const rec = (await user.get('/v1/usage/me')).body.items[0];
    assert.ok(rec.credits > 0);
    assert.ok(text.includes(rec.credits.toLocaleString('en-US')), text);
    // The key's spend against its budget follows (the list is read again every 5 s).
    await item.getByText(`${rec.credits.toLocaleString('en-US')} / 20,000 per week`).waitFor({ timeout: 10_000 });
    // The usage filtered to that key: its call stays; the sign-in token's calls (none here) would go.
    await page.getByLabel('Calls made with').selectOption({ label: `Key: ${EVIL_KEY}` });
    await page.getByTestId('usage-table').locator('tbody tr').filter({ hasText: 'stub-model' }).first().waitFor();
    await shot(page, 'userpage-account-1280');
    await fits(page);

    // Revoke, after a confirm: the key is refused.
    await item.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await item.locator('.badge').filter({ hasText: 'revoked' }).waitFor();
    await until('the revoked key refused', async () => (await client(gw.url, secret).get('/v1/balance/me')).status === 401, 10_000);

    assert.equal(await page.evaluate(() => (window as { __pwned?: number }).__pwned ?? 0), 0);
    assert.ok(!page.url().includes(token));
    await ctx.close();
  });

  test('at phone width (375 px): the same page, nothing wider than the screen', async () => {
    const { ctx, page } = await open(PHONE);
    await page.goto(`${gw.url}/u/dark/`);
    await page.getByTestId('city-name').filter({ hasText: 'Dark city' }).waitFor();
    // The accent colour reaches Pico's primary colour; the logo is shown, without a referrer.
    const bg = await page.getByRole('button', { name: 'Sign in with local login' }).evaluate((b) => getComputedStyle(b).backgroundColor);
    assert.equal(bg, 'rgb(124, 58, 237)');
    const logo = page.locator('.up-brand img');
    await until('the logo loaded', () => logo.evaluate((i: HTMLImageElement) => i.complete && i.naturalWidth > 0), 5000);
    assert.equal(await logo.getAttribute('src'), LOGO_URL);
    assert.equal(await logo.getAttribute('referrerpolicy'), 'no-referrer');
    await fits(page);
    await shot(page, 'userpage-signin-375');
    await page.getByLabel('User id').fill('phone-user');
    await page.getByRole('button', { name: 'Sign in with local login' }).click();
    await page.getByTestId('balance-credits').filter({ hasText: /\d/ }).waitFor();
    const token = await page.evaluate(() => sessionStorage.getItem('citygate.user.dark')!);
    await admin.post('/v1/balance/adjust', { city_id: 'dark', user_id: 'phone-user', credits: 2_000_000, reason: 'test grant', idempotency_key: 'phone-grant' });
    const made = await client(gw.url, token).post('/v1/accounts/keys/create', { name: 'a rather long key name for a phone screen', budget: { credits: 500_000, window: 'day' } });
    assert.equal(made.status, 200, made.text);
    await fetch(`${gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${made.body.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] }),
    }).then((r) => r.text());
    await page.reload();
    await page.getByTestId('key-list').waitFor();
    await page.getByTestId('usage-table').locator('tbody tr').first().filter({ hasText: 'ok' }).waitFor({ timeout: 5000 });
    await fits(page);
    await shot(page, 'userpage-account-375');
    // A key with an rpm and an IP allow-list, made on the phone: a bad value is the API's 400, next to its field.
    await page.getByText('New key…').click();
    await page.getByLabel('Name', { exact: true }).fill('office script');
    await page.getByLabel('Requests per minute (optional)').fill('lots');
    await page.getByLabel('Allowed IPs (optional)').fill('10.0.0.0/8, 192.168.1.7');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('alert').filter({ hasText: /rpm/ }).waitFor();
    assert.equal(await page.getByLabel('Requests per minute (optional)').getAttribute('aria-invalid'), 'true');
    await page.getByLabel('Requests per minute (optional)').fill('30');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'I have copied it' }).click();
    const office = page.getByTestId('key-list').locator('li').filter({ hasText: 'office script' });
    assert.match(await office.innerText(), /30 requests \/ min[\s\S]*From: 10\.0\.0\.0\/8, 192\.168\.1\.7/);
    await fits(page);
    await ctx.close();
  });

  test('plans: the city\'s plans to subscribe to; the checkout in a new tab; the plan and its windows shown once Stripe\'s events land', async () => {
    const plan = await admin.post('/v1/plans/create', {
      city_id: 'acme',
      name: 'Pro',
      description: 'For daily agent work.',
      interval: 'month',
      price: { amount: 2000, currency: 'usd' },
      credits: 1_000_000,
      windows: [{ window: '5h', limit: 200_000 }, { window: '7d', limit: 800_000 }],
    });
    assert.equal(plan.status, 200, plan.text);
    for (const viewport of [DESKTOP, PHONE]) {
      const { ctx, page } = await open(viewport);
      const w = viewport.width;
      await page.goto(`${gw.url}/u/acme/`);
      await page.getByLabel('User id').fill(`plan-user-${w}`);
      await page.getByRole('button', { name: 'Sign in with local login' }).click();
      const card = page.locator(`[data-plan="${plan.body.plan.id}"]`);
      await card.waitFor();
      assert.match(await card.innerText(), /Pro[\s\S]*20\.00 USD[\s\S]*1,000,000 credits a month[\s\S]*200,000 in any 5 h[\s\S]*800,000 in any 7 d/);
      await fits(page);
      await shot(page, `userpage-plans-${w}`);
      // Subscribe: Stripe's checkout opens in a new tab, which cannot reach back to this page.
      const [tab] = await Promise.all([page.waitForEvent('popup'), card.getByRole('button', { name: 'Subscribe' }).click()]);
      await tab.waitForURL((u) => u.origin === new URL(stripe.origin).origin);
      assert.equal(await tab.evaluate(() => window.opener), null);
      const sessionId = /\/c\/pay\/([^/?]+)/.exec(tab.url())![1];
      await tab.close();
      // Stripe completes the checkout and sends its events to the plans webhook.
      for (const event of [stripe.completeSession(sessionId), ...stripe.subscriptionEventsOf(sessionId)]) {
        const raw = JSON.stringify(event);
        const r = await fetch(`${gw.url}/v1/plans/webhook/stripe`, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(raw, WHSEC) }, body: raw });
        assert.equal(r.status, 200, await r.text());
      }
      await page.getByTestId('plan-name').filter({ hasText: 'Pro' }).waitFor({ timeout: 10_000 });
      const meters = page.getByTestId('plans').locator('.meter');
      assert.equal(await meters.count(), 3); // 5 h, 7 d and the period
      assert.match(await page.getByTestId('plans').innerText(), /active[\s\S]*renews/);
      await fits(page);
      await shot(page, `userpage-plan-active-${w}`);
      await ctx.close();
    }
  });

  test('GitHub sign-in in this tab: back on the page signed in, no state or token left in the URL or history', async () => {
    const { ctx, page } = await open(DESKTOP);
    await page.goto(`${gw.url}/u/acme/`);
    await page.getByRole('button', { name: 'Continue with GitHub' }).click();
    await page.getByTestId('balance-credits').filter({ hasText: /\d/ }).waitFor();
    assert.equal(await page.getByTestId('signed-in-as').innerText(), 'The Octocat');
    assert.equal(new URL(page.url()).search, '');
    const token = await page.evaluate(() => sessionStorage.getItem('citygate.user.acme')!);
    assert.match(token, /^eyJ/);
    // Back in history is the sign-in start, never a URL with the state.
    const entries = await page.evaluate(() => history.length);
    assert.ok(entries >= 1);
    assert.ok(!page.url().includes('oauth_state'));
    const me = await client(gw.url, token).get('/v1/accounts/me');
    assert.equal(me.body.identities[0].provider, 'github');
    // Sign out revokes the token.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Continue with GitHub' }).waitFor();
    await until('the token refused after sign-out', async () => (await client(gw.url, token).get('/v1/accounts/me')).status === 401, 10_000);
    await ctx.close();
  });

  test('Google sign-in at phone width: the same flow, back signed in as the Google account', async () => {
    const { ctx, page } = await open(PHONE);
    await page.goto(`${gw.url}/u/dark/`);
    await page.getByRole('button', { name: 'Continue with Google' }).click();
    await page.getByTestId('balance-credits').filter({ hasText: /\d/ }).waitFor();
    assert.equal(new URL(page.url()).search, '');
    const token = await page.evaluate(() => sessionStorage.getItem('citygate.user.dark')!);
    const me = (await client(gw.url, token).get('/v1/accounts/me')).body;
    assert.deepEqual([me.city_id, me.name, me.identities[0].provider], ['dark', 'Ada Lovelace', 'google']);
    await fits(page);
    await ctx.close();
  });

  test('no request left the gateway, and no page error', () => {
    assert.deepEqual(outside, []);
    assert.deepEqual(pageErrors, []);
  });
});
