// The console turns a city's request logs on (Cities → Limits…) and shows a call's request log
// from its usage record, in Debian's chromium: the request's headers with the credential redacted, the request body with a pasted
// sk- key redacted, and a streamed answer as the text it assembled to; a record of a call made
// while logging was off says there is no log.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { call } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startAiWorld, type AiWorld } from '../ai/setup.ts';
import { consolePages } from './pages.ts';

browserSuite('usage page: request logs', () => {
  let w: AiWorld;
  let browser: Browser;
  const { pageErrors, outside, open, signIn, shot, gotoPage } = consolePages(() => ({ url: w.gw.url, browser }));

  before(async () => {
    w = await startAiWorld();
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await w?.close();
  });

  test('an admin turns full request logs on for a city; a streamed call then opens from its usage record, redacted', async () => {
    // one call with logging off (the default)
    const before = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', { token: w.alice, body: { model: 'stub-model', messages: [{ role: 'user', content: 'not logged' }] } });
    assert.equal(before.status, 200);

    const { ctx, page } = await open();
    await signIn(page, w.gw.adminKey);
    // Cities → Limits… of city-a: request logs 'full'
    await gotoPage(page, 'cities');
    await page.locator('tr[data-city="city-a"]').getByRole('button', { name: 'Limits…' }).click();
    const form = page.getByRole('form', { name: 'Limits of city-a' });
    await form.waitFor();
    assert.equal(await form.getByTestId('now-request-log').innerText(), 'env default (off)');
    await form.getByLabel('Request logs for this city').selectOption('full');
    await form.getByRole('button', { name: 'Save limits' }).click();
    await form.getByRole('status').waitFor();
    assert.equal(await form.getByTestId('now-request-log').innerText(), 'full');
    assert.equal((await w.admin.get('/v1/cities/get?city_id=city-a')).body.request_log, 'full');
    await shot(page, 'city-request-log-setting-1280');

    const r = await call(w.gw.url, 'POST', '/v1/ai/chat/completions', {
      token: w.alice,
      body: { model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'why is sk-proj-Pasted0123456789abcdef in my logs' }] },
    });
    assert.equal(r.status, 200, r.text);
    const requestId = r.headers.get('x-request-id')!;
    await until('the log', async () => (await w.admin.get(`/v1/usage/request-log?request_id=${requestId}`)).status === 200);

    await gotoPage(page, 'usage');
    const table = page.getByTestId('usage-table');
    await table.locator('tbody tr').nth(1).waitFor();
    // the newest record is the logged call: open its log
    await table.locator('tbody tr').first().getByRole('button', { name: 'Log' }).click();
    const log = page.getByTestId('request-log');
    await log.waitFor();
    const text = await log.innerText();
    assert.match(text, /POST \/v1\/ai\/chat\/completions → 200/);
    assert.match(text, /stub-model/);
    assert.match(text, /full log/);
    assert.match(text, /authorization\s+\[redacted\]/);
    assert.match(text, /Assembled from \d+ stream events/);
    const reqBody = await log.getByLabel('Request body').innerText();
    assert.match(reqBody, /why is \[redacted\] in my logs/);
    const resBody = await log.getByLabel('Response body').innerText();
    assert.match(resBody, /"content": "Hello from stub: why is \[redacted\] in my logs"/);
    assert.match(resBody, /"object": "chat.completion"/);
    assert.ok(!text.includes('sk-proj-Pasted') && !text.includes(w.alice), 'no key or token on the page');
    await shot(page, 'usage-request-log-1280');

    // the older record (logging was off then) has none
    await log.getByRole('button').first().waitFor({ state: 'detached' }).catch(() => {});
    await table.locator('tbody tr').first().getByRole('button', { name: 'Hide log' }).click();
    await table.locator('tbody tr').nth(1).getByRole('button', { name: 'Log' }).click();
    await page.getByText('No request log for this call').waitFor();
    await ctx.close();

    // the city's bureau sees the same log; another city's bureau sees neither the record nor the log
    const bureau = (await w.admin.post('/v1/bureaus/create', { city_id: 'city-a', name: 'a' })).body.bureau_token;
    const b = await open();
    await signIn(b.page, bureau);
    await gotoPage(b.page, 'usage');
    const rows = b.page.getByTestId('usage-table').locator('tbody tr');
    await rows.first().getByRole('button', { name: 'Log' }).click();
    const seen = await b.page.getByTestId('request-log').innerText();
    assert.match(seen, /POST \/v1\/ai\/chat\/completions → 200/);
    assert.match(seen, /Hello from stub: why is \[redacted\] in my logs/);
    await shot(b.page, 'usage-request-log-bureau-1280');
    await b.ctx.close();
    const other = (await w.admin.post('/v1/bureaus/create', { city_id: 'city-b', name: 'b' })).body.bureau_token;
    assert.equal((await call(w.gw.url, 'GET', `/v1/usage/request-log?request_id=${requestId}`, { token: other })).status, 404);
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(outside, []);
  });
});
