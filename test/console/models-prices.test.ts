// The console's model side (issue 26), in Debian's chromium against a real gateway and the
// OpenAI stub: the operator adds a priced model with an alias on the Models page, sets a city's
// price multiplier on the Cities page, calls the model from the playground, and sees the charge
// and the margin on the usage and overview pages.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { consolePages } from './pages.ts';

browserSuite('the console: models, city prices and margins', () => {
  let stub: OpenAIStub;
  let gw: TestGateway;
  let browser: Browser;
  let admin: ReturnType<typeof client>;
  const { outside, pageErrors, open, signIn, shot, gotoPage } = consolePages(() => ({ url: gw.url, browser }));

  before(async () => {
    stub = await startOpenAIStub();
    gw = await startGateway({
      env: { TEXTPROVIDER_API_KEY: 'sk-stub', TEXTPROVIDER_BASE_URL: stub.url, TEXTPROVIDER_MODELS: 'stub-model', USAGE_FLUSH_MS: '20', BALANCE_INITIAL_CREDITS: '1000000' },
    });
    admin = client(gw.url, gw.adminKey);
    await admin.post('/v1/cities/create', { name: 'Shop', city_id: 'shop' });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await gw?.stop();
    await stub?.close();
  });

  test('add a model with a price, set a city multiplier, call it from the playground, see the charge and the margin', async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);

    // Models: a bad price is refused in the API's words, then the model is added.
    await gotoPage(page, 'models');
    await page.getByText('Add a model…').click();
    const add = page.getByRole('form', { name: 'Add a model' });
    await add.getByLabel('Model id', { exact: true }).fill('resale-chat');
    await add.getByLabel('Name').fill('Resale chat');
    await add.getByLabel('Upstream model id').fill('stub-model');
    await add.getByLabel('Env slot (optional)').fill('textprovider');
    await add.getByLabel('Per request').fill('-5');
    await add.getByRole('button', { name: 'Add model' }).click();
    await add.getByRole('alert').filter({ hasText: /prices\.per_request/ }).waitFor();
    assert.equal(await add.getByLabel('Per request').getAttribute('aria-invalid'), 'true');
    await add.getByLabel('Per request').fill('1000');
    await add.getByLabel('Aliases').fill('gpt-5');
    await add.getByRole('button', { name: 'Add model' }).click();
    await add.getByRole('status').filter({ hasText: 'Added resale-chat' }).waitFor();
    const row = page.locator('tr[data-model="resale-chat"]');
    await row.waitFor();
    assert.match(await row.innerText(), /resale-chat[\s\S]*Resale chat[\s\S]*textprovider → stub-model[\s\S]*gpt-5[\s\S]*callable[\s\S]*database[\s\S]*1,000 per request/);
    await shot(page, 'models-added-1280');
    const api = (await admin.get('/v1/ai/models/list')).body.items.find((m: any) => m.model_id === 'resale-chat');
    assert.deepEqual(api.prices, { per_request: 1000 });
    assert.deepEqual(api.aliases, ['gpt-5']);

    // Cities: shop charges 25 % over the base price.
    await gotoPage(page, 'cities');
    await page.locator('tr[data-city="shop"]').getByRole('button', { name: 'Models & prices…' }).click();
    const prices = page.getByRole('form', { name: 'Models and prices of shop' });
    await prices.getByLabel('Price multiplier').fill('1.25');
    await prices.getByText("What the city's users pay").click();
    await prices.getByTestId('city-price-list').locator('tr', { hasText: 'resale-chat' }).filter({ hasText: /1,250 per_request/ }).waitFor();
    await prices.getByRole('button', { name: 'Save models and prices' }).click();
    await prices.getByRole('status').filter({ hasText: /^Saved at/ }).waitFor();
    assert.equal((await admin.get('/v1/cities/get?city_id=shop')).body.price_multiplier, 1.25);
    await shot(page, 'city-prices-1280');

    // Playground: the model, as alice of shop: 1000 × 1.25 = 1250 credits.
    await gotoPage(page, 'playground');
    await page.getByLabel('City').selectOption('shop');
    await page.getByLabel('As user').fill('alice');
    await page.getByLabel('Model').selectOption('resale-chat');
    await page.getByLabel('Message').fill('what does this cost');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByTestId('answer').filter({ hasText: 'Hello from stub' }).waitFor();
    await page.getByTestId('credits').filter({ hasText: /^1,250$/ }).waitFor();
    await shot(page, 'playground-resale-1280');

    // Usage: the charge and the margin, on the record and per city.
    await gotoPage(page, 'usage');
    const rec = page.getByTestId('usage-table').locator('tbody tr').first();
    await rec.waitFor();
    assert.match(await rec.innerText(), /shop \/ alice[\s\S]*resale-chat[\s\S]*1,250[\s\S]*margin 250/);
    const margins = page.getByTestId('city-margins').locator('tr[data-city="shop"]');
    await margins.waitFor();
    assert.match(await margins.innerText(), /shop\s+1\s+1,250\s+1,000\s+250\s*\(25\.0 %\)/);
    await shot(page, 'usage-margin-1280');

    await gotoPage(page, 'overview');
    await page.getByTestId('total-margin').filter({ hasText: /250/ }).waitFor();
    const byCity = page.locator('section', { has: page.getByRole('heading', { name: 'By city' }) });
    assert.match(await byCity.locator('tbody tr').first().innerText(), /shop[\s\S]*1,250[\s\S]*250\s*\(25\.0 %\)/);
    await shot(page, 'overview-margin-1280');

    // The city's bureau reads its models and prices, and cannot change them.
    const bureauToken = (await admin.post('/v1/bureaus/create', { city_id: 'shop', name: 'shop backend' })).body.bureau_token as string;
    const b = await open();
    await signIn(b.page, bureauToken);
    await gotoPage(b.page, 'cities');
    await b.page.locator('tr[data-city="shop"]').getByRole('button', { name: 'Models & prices…' }).click();
    const ro = b.page.getByRole('form', { name: 'Models and prices of shop' });
    assert.equal(await ro.getByLabel('Price multiplier').inputValue(), '1.25');
    assert.equal(await ro.getByLabel('Price multiplier').isDisabled(), true);
    assert.equal(await ro.getByRole('button', { name: 'Save models and prices' }).count(), 0);
    await ro.getByText("What the city's users pay").click();
    await ro.getByTestId('city-price-list').locator('tr', { hasText: 'resale-chat' }).filter({ hasText: /1,250 per_request/ }).waitFor();
    await gotoPage(b.page, 'models');
    await b.page.getByTestId('models').locator('tr', { hasText: 'resale-chat' }).filter({ hasText: /1,250 per request/ }).waitFor();
    await shot(b.page, 'bureau-models-1280');
    await b.ctx.close();

    // Disable, then remove: the list says so, and the API agrees.
    await gotoPage(page, 'models');
    await page.locator('tr[data-model="resale-chat"]').getByRole('button', { name: 'Disable' }).click();
    await page.locator('tr[data-model="resale-chat"]').getByText('disabled').waitFor();
    assert.equal((await admin.get('/v1/ai/models/list')).body.items.find((m: any) => m.model_id === 'resale-chat').enabled, false);
    await page.locator('tr[data-model="resale-chat"]').getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await page.locator('tr[data-model="resale-chat"]').waitFor({ state: 'detached' });
    assert.equal((await admin.get('/v1/ai/models/list')).body.items.some((m: any) => m.model_id === 'resale-chat'), false);
    await ctx.close();
    assert.deepEqual(outside, [], 'requests to other origins');
    assert.deepEqual(pageErrors, [], 'page errors');
  });
});
