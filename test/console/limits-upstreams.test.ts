// The console's Cities → Limits panel (rate limits and a per-user budget, read with cities/get,
// saved with cities/update) and the Models page's upstreams (ai/upstreams/*: circuit health,
// add, disable, remove), in Debian's chromium against a real gateway and OpenAI stubs. What the
// operator sees, what persists across a reload, the API's own words for a bad value, and no
// secret on screen.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { consolePages, PHONE } from './pages.ts';

const FLAKY_KEY = 'sk-flaky-upstream-secret-9876';

browserSuite('the console: city limits and budgets, upstream health', () => {
  let stub: OpenAIStub;
  let flaky: OpenAIStub;
  let gw: TestGateway;
  let browser: Browser;
  let admin: ReturnType<typeof client>;
  const { outside, pageErrors, open, signIn, shot, gotoPage } = consolePages(() => ({ url: gw.url, browser }));

  before(async () => {
    stub = await startOpenAIStub();
    flaky = await startOpenAIStub({ apiKey: FLAKY_KEY });
    gw = await startGateway({
      env: {
        TEXTPROVIDER_API_KEY: 'sk-stub',
        TEXTPROVIDER_BASE_URL: stub.url,
        TEXTPROVIDER_MODELS: 'stub-model',
        USAGE_FLUSH_MS: '20',
        AI_COOLDOWN_FAILURES: '2',
        AI_COOLDOWN_MS: '600000',
      },
    });
    admin = client(gw.url, gw.adminKey);
    await admin.post('/v1/cities/create', { name: 'Shop', city_id: 'shop' });
    await admin.post('/v1/env/upsert', { key: 'RATE_LIMIT_USER_RPM', value: '600' });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await gw?.stop();
    await stub?.close();
    await flaky?.close();
  });

  /** Opens the Limits panel of shop on the Cities page and waits for its values. */
  async function openLimits(page: Page) {
    await gotoPage(page, 'cities');
    await page.locator('tr[data-city="shop"]').getByRole('button', { name: 'Limits…' }).click();
    const form = page.getByRole('form', { name: 'Limits of shop' });
    await form.waitFor();
    return form;
  }

  test("a city's rate limits and user budget are edited, persist across a reload, and apply", async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    // Opening the panel only reads (cities/get): the city's updated_at does not move, so an
    // admin looking cannot race another admin's save.
    const stamp = (await admin.get('/v1/cities/get?city_id=shop')).body.updated_at;
    const writes: string[] = [];
    page.on('request', (r) => void (r.method() !== 'GET' && writes.push(`${r.method()} ${new URL(r.url()).pathname}`)));
    let form = await openLimits(page);
    await form.getByTestId('now-budget').waitFor();
    assert.equal((await admin.get('/v1/cities/get?city_id=shop')).body.updated_at, stamp, "opening the Limits panel changed the city's updated_at");
    assert.deepEqual(writes, [], 'opening the Limits panel wrote');
    // Nothing set: every limit falls back to its env key (the one set on the Env page is shown).
    assert.equal(await form.getByLabel('Requests / minute per user').inputValue(), '');
    await form.getByTestId('now-user_rpm').filter({ hasText: 'env default (600)' }).waitFor();
    await form.getByTestId('now-budget').filter({ hasText: 'no cap' }).waitFor();
    assert.match(await form.innerText(), /Empty = use the env default[\s\S]*0 = off for this city/);
    await shot(page, 'limits-empty-1280');

    await form.getByLabel('Requests / minute per user').fill('30');
    await form.getByLabel('Tokens / minute, whole city').fill('0');
    await form.getByLabel('Calls in flight per user').fill('4');
    await form.getByRole('switch', { name: 'Cap what each user spends' }).check();
    await form.getByLabel('Credits per user').fill('2000000');
    await form.getByLabel('Per', { exact: true }).selectOption('month');
    await form.getByRole('button', { name: 'Save limits' }).click();
    await form.getByRole('status').filter({ hasText: /^Saved at/ }).waitFor();
    await form.getByTestId('now-user_rpm').filter({ hasText: /^30$/ }).waitFor();

    // A reload (a new page load, same session) reads them back from the gateway.
    await page.reload();
    form = await openLimits(page);
    assert.equal(await form.getByLabel('Requests / minute per user').inputValue(), '30');
    assert.equal(await form.getByLabel('Tokens / minute, whole city').inputValue(), '0');
    assert.equal(await form.getByLabel('Calls in flight per user').inputValue(), '4');
    assert.equal(await form.getByLabel('Tokens / minute per user').inputValue(), '');
    assert.equal(await form.getByTestId('now-city_tpm').innerText(), 'off');
    assert.equal(await form.getByTestId('now-user_tpm').innerText(), 'env default');
    assert.ok(await form.getByRole('switch', { name: 'Cap what each user spends' }).isChecked());
    assert.equal(await form.getByLabel('Credits per user').inputValue(), '2000000');
    assert.equal(await form.getByLabel('Per', { exact: true }).inputValue(), 'month');
    await form.getByTestId('now-budget').filter({ hasText: '2,000,000 credits per user per month' }).waitFor();
    await shot(page, 'limits-saved-1280');

    // They apply: a user's balance shows the budget, and the rate-limit headers say 30.
    const user = client(gw.url, (await admin.post('/v1/cities/tokens/apply', { city_id: 'shop', user_id: 'ann' })).body.user_token);
    const me = await user.get('/v1/balance/me');
    assert.deepEqual([me.body.budget?.credits, me.body.budget?.period], [2_000_000, 'month']);
    const call = await fetch(`${gw.url}/v1/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${(await admin.post('/v1/cities/tokens/apply', { city_id: 'shop', user_id: 'ann' })).body.user_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await call.text();
    assert.equal(call.headers.get('x-ratelimit-limit-requests'), '30');

    // Emptying a field hands it back to the env key; turning the cap off removes it.
    await form.getByLabel('Calls in flight per user').fill('');
    await form.getByRole('switch', { name: 'Cap what each user spends' }).uncheck();
    await form.getByRole('button', { name: 'Save limits' }).click();
    await form.getByTestId('now-user_concurrency').filter({ hasText: 'env default' }).waitFor();
    await form.getByTestId('now-budget').filter({ hasText: 'no cap' }).waitFor();
    assert.equal((await user.get('/v1/balance/me')).body.budget ?? null, null);
    await ctx.close();
  });

  test("a bad value is refused with the API's message next to its field, and changes nothing", async () => {
    for (const [label, viewport] of [['1280', undefined], ['phone', PHONE]] as const) {
      const { ctx, page } = await open(viewport);
      await signIn(page, gw.adminKey);
      const form = await openLimits(page);
      const rpm = form.getByLabel('Requests / minute per user');
      await rpm.fill('-5');
      await form.getByRole('button', { name: 'Save limits' }).click();
      await form.getByRole('alert').filter({ hasText: 'limits.user_rpm: Too small: expected number to be >=0' }).waitFor();
      assert.equal(await rpm.getAttribute('aria-invalid'), 'true');
      assert.match(await form.locator('#shop-user_rpm-help').innerText(), /Too small: expected number to be >=0/);
      await shot(page, `limits-invalid-${label}`);

      await rpm.fill('1.5');
      await form.getByRole('button', { name: 'Save limits' }).click();
      await form.getByRole('alert').filter({ hasText: 'limits.user_rpm: Invalid input: expected int' }).waitFor();

      await rpm.fill('30');
      await form.getByRole('switch', { name: 'Cap what each user spends' }).check();
      await form.getByRole('button', { name: 'Save limits' }).click();
      await form.getByRole('alert').filter({ hasText: /^user_budget\.credits: / }).waitFor();
      assert.equal(await form.getByLabel('Credits per user').getAttribute('aria-invalid'), 'true');
      // Nothing was saved by the refused attempts.
      await form.getByRole('button', { name: 'Undo changes' }).click();
      await form.getByTestId('now-user_rpm').filter({ hasText: /^30$/ }).waitFor();
      await form.getByTestId('now-budget').filter({ hasText: 'no cap' }).waitFor();
      assert.equal(await form.getByRole('alert').count(), 0);
      await ctx.close();
    }
  });

  test("the Models page shows each upstream's circuit, masked keys, and follows a failing upstream", async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'models');
    const table = page.getByTestId('upstreams-table');
    const builtin = table.locator('tr[data-upstream="env:textprovider"]');
    await builtin.waitFor();
    assert.match(await builtin.innerText(), /textprovider \(env slot\)[\s\S]*openai-compatible[\s\S]*closed[\s\S]*stub-model/);
    await table.locator('tr[data-upstream="env:openai"]').getByText('missing-key').waitFor();

    // A bad upstream is refused in the API's words.
    await page.getByText('Add an upstream…').click();
    const add = page.getByRole('form', { name: 'Add an upstream' });
    await add.getByLabel('Name').fill('flaky');
    await add.getByRole('button', { name: 'Add upstream' }).click();
    await add.getByRole('alert').filter({ hasText: 'models: must name at least one model' }).waitFor();
    assert.equal(await add.getByLabel('Models').getAttribute('aria-invalid'), 'true');

    await add.getByLabel('Base URL').fill(flaky.url);
    await add.getByLabel('API key').fill(FLAKY_KEY);
    await add.getByLabel('Models').fill('flaky-model');
    await add.getByRole('button', { name: 'Add upstream' }).click();
    await add.getByRole('status').filter({ hasText: /^Added flaky \(ups_/ }).waitFor();
    const row = table.locator('tr[data-upstream^="ups_"]');
    await row.waitFor();
    assert.match(await row.innerText(), /^flaky/);
    assert.equal(await row.getByTestId('health').innerText(), 'closed');
    assert.match(await row.innerText(), /set ••••9876/);
    assert.ok(!(await page.locator('body').innerText()).includes(FLAKY_KEY), 'the API key is on the page');
    assert.ok(!(await page.content()).includes(FLAKY_KEY), 'the API key is in the DOM');
    const id = (await row.getAttribute('data-upstream'))!;

    // Edit: a bad weight is refused in the API's words; a new priority and key are saved (the key
    // still shown only by its last 4).
    await row.getByRole('button', { name: 'Edit…' }).click();
    const edit = page.getByRole('form', { name: 'Edit upstream flaky' });
    assert.equal(await edit.getByLabel('Models').inputValue(), 'flaky-model');
    assert.equal(await edit.getByLabel('API key').inputValue(), '');
    await edit.getByLabel('Weight').fill('0');
    await edit.getByRole('button', { name: 'Save upstream' }).click();
    await edit.getByRole('alert').filter({ hasText: /^weight: Too small/ }).waitFor();
    await edit.getByLabel('Weight').fill('3');
    await edit.getByLabel('Priority').fill('5');
    await edit.getByRole('button', { name: 'Save upstream' }).click();
    await edit.getByRole('status').filter({ hasText: /^Saved flaky/ }).waitFor();
    await row.filter({ hasText: 'priority 5' }).filter({ hasText: 'weight 3' }).waitFor();
    assert.match(await row.innerText(), /set ••••9876/, 'an empty key field keeps the key');
    const saved = (await admin.get('/v1/ai/upstreams/list')).body.items.find((u: { upstream_id: string }) => u.upstream_id === id);
    assert.deepEqual([saved.priority, saved.weight, saved.has_key], [5, 3, true]);
    await shot(page, 'models-upstream-edit-1280');
    await row.getByRole('button', { name: 'Edit…' }).click();

    // It serves, then fails twice (AI_COOLDOWN_FAILURES=2): its circuit opens, and the page shows it.
    const user = client(gw.url, (await admin.post('/v1/cities/tokens/apply', { city_id: 'shop', user_id: 'bo' })).body.user_token);
    const chat = () => user.post('/v1/ai/chat/completions', { model: 'flaky-model', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal((await chat()).status, 200);
    flaky.setFault({ status: 503 });
    for (let i = 0; i < 2; i++) assert.notEqual((await chat()).status, 200);
    assert.equal(flaky.faulted, 2);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await row.getByTestId('health').filter({ hasText: 'open · 1 model' }).waitFor();
    assert.match(await row.locator('li[data-model="flaky-model"]').innerText(), /flaky-model\s+open/);
    await shot(page, 'models-upstream-open-1280');

    // Disabling and enabling it (an update) starts it with a clean record.
    flaky.setFault(null);
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.getByTestId('health').filter({ hasText: 'disabled' }).waitFor();
    await row.getByRole('button', { name: 'Enable' }).click();
    await row.getByTestId('health').filter({ hasText: 'closed' }).waitFor();

    // At phone size the table scrolls in its own box; the page does not scroll sideways.
    const phone = await open(PHONE);
    await signIn(phone.page, gw.adminKey);
    await gotoPage(phone.page, 'models');
    await phone.page.getByTestId('upstreams-table').locator(`tr[data-upstream="${id}"]`).waitFor();
    await shot(phone.page, 'models-upstreams-phone');
    const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 1, `the page scrolls sideways by ${overflow} px`);
    await phone.ctx.close();

    // Remove asks first; Cancel keeps it.
    await row.getByRole('button', { name: 'Remove' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText('Remove upstream flaky?').waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.ok((await admin.get('/v1/ai/upstreams/list')).body.items.some((u: { upstream_id: string }) => u.upstream_id === id));
    await row.getByRole('button', { name: 'Remove' }).click();
    await dialog.getByRole('button', { name: 'Remove' }).click();
    await row.waitFor({ state: 'detached' });
    assert.ok(!(await admin.get('/v1/ai/upstreams/list')).body.items.some((u: { upstream_id: string }) => u.upstream_id === id));
    await ctx.close();
  });

  test('a bureau sees neither the limits nor the upstreams; nothing loaded from elsewhere, no page errors', async () => {
    const bureau = (await admin.post('/v1/bureaus/create', { city_id: 'shop', name: 'shop backend' })).body.bureau_token;
    const { ctx, page } = await open();
    await signIn(page, bureau);
    await gotoPage(page, 'cities');
    await page.locator('tr[data-city="shop"]').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Limits…' }).count(), 0);
    await gotoPage(page, 'models');
    await page.getByTestId('models').waitFor();
    assert.equal(await page.getByTestId('upstreams').count(), 0);
    await ctx.close();
    assert.deepEqual(outside, [], 'requests to other origins');
    assert.deepEqual(pageErrors, [], 'page errors');
  });
});
