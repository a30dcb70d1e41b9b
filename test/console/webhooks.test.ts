// The console's Webhooks page and the Cities page's alert threshold (issue 28), in Debian's
// chromium against a real gateway and a local receiver: add an endpoint (its secret shown
// once), send a test event, see the delivery and its attempts, redeliver one the receiver
// refused at first; a bureau sees only its own city; set balance.low on the Cities page.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startReceiver, type Receiver } from '../stubs/webhook-receiver.ts';
import { consolePages, PHONE } from './pages.ts';

browserSuite('the console: webhooks', () => {
  let gw: TestGateway;
  let rx: Receiver;
  let browser: Browser;
  let admin: ReturnType<typeof client>;
  const { outside, pageErrors, open, signIn, shot, gotoPage } = consolePages(() => ({ url: gw.url, browser }));

  before(async () => {
    rx = await startReceiver();
    gw = await startGateway({ env: { AI_FETCH_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_MS: '100', WEBHOOK_RETRY_BASE_MS: '60000' } });
    admin = client(gw.url, gw.adminKey);
    await admin.post('/v1/cities/create', { name: 'Shop', city_id: 'shop' });
    await admin.post('/v1/cities/create', { name: 'Other', city_id: 'other' });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await gw?.stop();
    await rx?.close();
  });

  test('add an endpoint, send a test event, see its attempts, redeliver', async () => {
    rx.plan = (d) => (d.n === 1 ? 503 : 200); // the first delivery of each event is refused
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'webhooks?city=shop');
    await page.getByText('No endpoints for this city yet.').waitFor();
    await page.getByLabel('Endpoint URL').fill(rx.url);
    await page.getByLabel('all events').uncheck();
    await page.getByLabel('payment.succeeded').check();
    await page.getByLabel('balance.low').check();
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = await page.getByTestId('one-time-secret').innerText();
    assert.match(secret, /^whsec_/);
    const row = page.locator('tr[data-endpoint]');
    await row.waitFor();
    assert.match(await row.innerText(), /payment\.succeeded, balance\.low/);
    await shot(page, 'webhooks-created-1280');

    const [sent] = await Promise.all([page.waitForResponse((r) => r.url().includes('/v1/webhooks/test')), row.getByRole('button', { name: 'Send test' }).click()]);
    assert.equal(sent.status(), 200, await sent.text());
    await page.getByRole('status').filter({ hasText: /Test event msg_[\w-]+ queued/ }).waitFor();
    await until('the first (refused) attempt', () => rx.deliveries.length >= 1);
    await row.getByRole('button', { name: 'Deliveries' }).click();
    const deliveries = page.getByRole('region', { name: `Deliveries to ${rx.url}` });
    await until('the attempt is listed', async () => {
      await deliveries.getByRole('button', { name: 'Refresh' }).click();
      return (await deliveries.locator('tr[data-event]').count()) === 1 && /1 attempt/.test(await deliveries.locator('tr[data-event]').innerText());
    });
    await deliveries.getByRole('button', { name: '1 attempt' }).click();
    await deliveries.getByText('receiver says no (503)').waitFor();
    assert.match(await deliveries.locator('tr[data-event]').innerText(), /webhook\.test[\s\S]*pending[\s\S]*HTTP 503/);
    await shot(page, 'webhooks-refused-1280');

    // Redeliver now (the next retry would be a minute away): it goes through, signed.
    await deliveries.getByRole('button', { name: 'Redeliver' }).click();
    await until('delivered', () => rx.deliveries.some((d) => d.answered === 200));
    await until('shown delivered', async () => {
      await deliveries.getByRole('button', { name: 'Refresh' }).click();
      return /delivered[\s\S]*HTTP 200/.test(await deliveries.locator('tr[data-event]').innerText());
    });
    // the attempt log stays open across the refresh: both attempts, newest first
    await deliveries.getByRole('button', { name: '2 attempts' }).waitFor();
    await deliveries.getByText('ok', { exact: true }).waitFor();
    const ok = rx.deliveries.find((d) => d.answered === 200)!;
    assert.equal((new Webhook(secret).verify(ok.body, ok.headers as Record<string, string>) as { type: string }).type, 'webhook.test');
    await shot(page, 'webhooks-delivered-1280');
    assert.ok(!(await page.content()).includes(secret.slice(6)) || (await page.getByTestId('one-time-secret').count()) === 1, 'the secret is shown only in its one-time box');
    await ctx.close();
  });

  test('the balance.low threshold on the Cities page; a bureau sees only its city', async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'cities');
    await page.locator('tr[data-city="shop"]').getByRole('button', { name: 'Alerts…' }).click();
    await page.getByLabel('balance.low threshold of shop').fill('1000000');
    await page.getByRole('button', { name: 'Save alert' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    assert.equal((await admin.get('/v1/webhooks/alerts?city_id=shop')).body.balance_low, 1_000_000);
    await page.getByLabel('balance.low threshold of shop').fill('-5');
    await page.getByRole('button', { name: 'Save alert' }).click();
    await page.locator('form.alerts').getByText(/balance_low/).first().waitFor();
    assert.equal((await admin.get('/v1/webhooks/alerts?city_id=shop')).body.balance_low, 1_000_000, 'a bad value changed nothing');
    await shot(page, 'webhooks-alerts-1280');
    await ctx.close();

    await admin.post('/v1/webhooks/create', { city_id: 'other', url: `${rx.url}?other`, events: ['*'] });
    const bureau = (await admin.post('/v1/bureaus/create', { city_id: 'shop', name: 'backend' })).body.bureau_token;
    const phone = await open(PHONE);
    await signIn(phone.page, bureau);
    await gotoPage(phone.page, 'webhooks');
    await phone.page.locator('tr[data-endpoint]').first().waitFor();
    const text = await phone.page.locator('main').innerText();
    assert.ok(text.includes(rx.url) && !text.includes('?other'), 'only its own city’s endpoints');
    await shot(phone.page, 'webhooks-bureau-390');
    await phone.ctx.close();
    assert.deepEqual(outside, []);
    assert.deepEqual(pageErrors, []);
  });
});
