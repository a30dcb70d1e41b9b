// The console's Plans page (issue 34), in Debian's chromium against a real gateway: the admin
// creates a plan through the form (a bad window named in the error first), gives it to a user,
// and after the user's calls sees that user's windows as meters that moved.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { startAiWorld, tokenFor, type AiWorld } from '../ai/setup.ts';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { call } from '../helpers/http.ts';
import { consolePages } from './pages.ts';

browserSuite('the console: plans', () => {
  let w: AiWorld;
  let browser: Browser;
  const { outside, pageErrors, open, signIn, shot, gotoPage } = consolePages(() => ({ url: w.gw.url, browser }));

  before(async () => {
    w = await startAiWorld({ env: { MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 100 } }), USAGE_FLUSH_MS: '20', BALANCE_FLUSH_MS: '20' } });
    await w.admin.post('/v1/cities/create', { name: 'Shop', city_id: 'shop' });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await w?.close();
  });

  test('create a plan, give it to a user, see the meters move after calls', async () => {
    const { page } = await open();
    await signIn(page, w.gw.adminKey);
    await gotoPage(page, 'plans');
    await page.getByLabel('City').selectOption('shop');
    await page.getByText('No plans in shop yet.').waitFor();
    await page.getByRole('button', { name: 'New plan' }).click();
    await page.getByLabel('Name').fill('Pro');
    await page.getByLabel('Credits per period').fill('5000');
    await page.getByLabel('Windows').fill('5x=1000');
    await page.getByRole('button', { name: 'Create plan' }).click();
    await page.getByText(/windows/).first().waitFor();
    assert.equal(await page.locator('#plan-windows').getAttribute('aria-invalid'), 'true', 'the bad window is marked');
    await page.getByLabel('Windows').fill('5h=1000, 7d=3000');
    await page.getByRole('button', { name: 'Create plan' }).click();
    const row = page.locator('tr', { hasText: 'Pro' });
    await row.waitFor();
    assert.match(await row.innerText(), /20\.00 USD \/ month[\s\S]*5,000[\s\S]*1,000 per 5 h, 3,000 per 7 d/);
    await shot(page, 'plans-created-1280');

    await page.getByLabel('User id').fill('alice-plan');
    await page.getByRole('button', { name: /Give without payment/ }).click();
    await page.getByText('0 of 1,000 credits used').waitFor();
    const token = await tokenFor(w.admin, 'shop', 'alice-plan');
    for (let i = 0; i < 3; i++) assert.equal((await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token, body: { model: 'stub-model', messages: [{ role: 'user', content: `hi ${i}` }] } })).status, 200);
    // the slices come back within a second: then the meters show exactly what was used
    for (let tries = 0; tries < 50; tries++) {
      await page.getByRole('button', { name: 'Look up' }).click();
      if (await page.getByText('300 of 1,000 credits used').isVisible()) break;
      await page.waitForTimeout(200);
    }
    await page.getByText('300 of 1,000 credits used').waitFor();
    await page.getByText('300 of 3,000 credits used').waitFor();
    await page.getByText('300 of 5,000 credits used').waitFor();
    await shot(page, 'plans-meters-1280');
    // The Users page shows the same plan and meters for that user.
    await gotoPage(page, 'users?city=shop&user=alice-plan');
    const card = page.getByRole('article', { name: 'Plan' });
    await card.getByText('300 of 1,000 credits used').waitFor();
    assert.match(await card.innerText(), /Pro[\s\S]*active[\s\S]*via manual/);
    await shot(page, 'plans-user-1280');
    assert.deepEqual(outside, []);
    assert.deepEqual(pageErrors, []);
  });
});
