// The console's usage page shows prompt-cache reads and writes beside the tokens in and out,
// a call's note (hosted tools a translated call left out), and the API key of a call, with a
// filter by key, in Debian's chromium.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import Anthropic from '@anthropic-ai/sdk';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { client } from '../helpers/http.ts';
import { startAgentsWorld, upstreamCalls, type AgentsWorld } from '../ai/agents-world.ts';
import { consolePages } from './pages.ts';

browserSuite('usage page: cache reads and writes', () => {
  let w: AgentsWorld;
  let browser: Browser;
  const { pageErrors, open, signIn, shot, gotoPage } = consolePages(() => ({ url: w.gw.url, browser }));

  before(async () => {
    w = await startAgentsWorld();
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await w?.close();
  });

  test('a Claude call forwarded with cache writes and reads, and a Responses call that left web_search out', async () => {
    const t = await w.user('console');
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    await new Anthropic({ baseURL: `${w.gw.url}/v1/ai`, authToken: t, maxRetries: 0 }).messages.create({ model: 'fwd-sonnet', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    const r = await client(w.gw.url, t).post('/v1/ai/responses', { model: 'gpt-4o-mini', input: 'hi', tools: [{ type: 'web_search' }] });
    assert.equal(r.status, 200, r.text);
    await w.settled(t, b0, c0);

    const { ctx, page } = await open();
    await signIn(page, w.gw.adminKey);
    await gotoPage(page, 'usage');
    const table = page.getByTestId('usage-table');
    await table.locator('tbody tr').nth(1).waitFor();
    assert.ok(await table.getByRole('columnheader', { name: 'Cache read / write' }).isVisible());
    const rows = await table.locator('tbody tr').allInnerTexts();
    const sonnet = rows.find((x) => x.includes('fwd-sonnet'))!;
    assert.match(sonnet, /1,350 \/ 12\s+1,000 \/ 300\s+1,980/, sonnet);
    const mini = rows.find((x) => x.includes('gpt-4o-mini'))!;
    assert.match(mini, /hosted tools dropped: web_search/);
    assert.match(mini, /1,000 \/ 0/);
    await shot(page, 'usage-cache-1280');
    await ctx.close();
    assert.deepEqual(pageErrors, []);
  });

  test('the API key of a call, and the filter by key', async () => {
    const t = await w.user('console-keys');
    const made = await client(w.gw.url, t).post('/v1/accounts/keys/create', { name: 'console key' });
    assert.equal(made.status, 200, made.text);
    const { id } = made.body.key;
    const b0 = await w.balance(t);
    const c0 = upstreamCalls(w);
    const r = await client(w.gw.url, made.body.secret).post('/v1/ai/responses', { model: 'gpt-4o-mini', input: 'with a key' });
    assert.equal(r.status, 200, r.text);
    assert.equal((await client(w.gw.url, t).post('/v1/ai/responses', { model: 'gpt-4o-mini', input: 'without' })).status, 200);
    await w.settled(t, b0, c0);

    const { ctx, page } = await open();
    await signIn(page, w.gw.adminKey);
    await gotoPage(page, 'usage');
    const table = page.getByTestId('usage-table');
    await table.locator('tbody tr').first().waitFor();
    await page.getByLabel('API key').fill(`cg_key_${id}`);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await table.getByTestId('usage-key').first().waitFor();
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid="usage-table"] tbody tr').length === n, 1);
    assert.match(await table.locator('tbody tr').first().innerText(), new RegExp(`console-keys[\\s\\S]*key cg_key_${id}[\\s\\S]*gpt-4o-mini`));
    await shot(page, 'usage-key-filter-1280');
    await ctx.close();
    assert.deepEqual(pageErrors, []);
  });
});
