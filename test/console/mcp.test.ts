// The console's Tools (MCP) page (issue 36), in Debian's chromium against a real gateway and an
// upstream MCP server built with the official SDK: add a server with a secret header (never
// shown again), test it (its tools, which are offered, their names for users), set a tool's
// price, and follow the tool calls a user makes through /v1/mcp; a bureau sees only its city.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startMcpStub, type McpStub } from '../stubs/mcp-upstream.ts';
import { consolePages, PHONE } from './pages.ts';

const SECRET = 'console-upstream-secret-123456';

browserSuite('the console: tools (MCP)', () => {
  let gw: TestGateway;
  let up: McpStub;
  let browser: Browser;
  let admin: ReturnType<typeof client>;
  const { outside, pageErrors, open, signIn, shot, gotoPage } = consolePages(() => ({ url: gw.url, browser }));

  before(async () => {
    up = await startMcpStub({ name: 'search', secretHeader: ['x-api-key', SECRET], tools: [{ name: 'web', description: 'Search the web' }, { name: 'news' }, { name: 'admin' }] });
    gw = await startGateway({ env: { AI_FETCH_ALLOW_PRIVATE: 'true', USAGE_FLUSH_MS: '20' } });
    admin = client(gw.url, gw.adminKey);
    await admin.post('/v1/cities/create', { name: 'Shop', city_id: 'shop' });
    await admin.post('/v1/cities/create', { name: 'Other', city_id: 'other' });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await gw?.stop();
    await up?.close();
  });

  test('add a server, test it, set a tool price, follow its usage', async () => {
    const { ctx, page } = await open();
    await signIn(page, gw.adminKey);
    await gotoPage(page, 'mcp?city=shop');
    await page.getByText('No MCP servers for this city yet.').waitFor();
    const form = page.getByRole('form', { name: 'Add an MCP server' });
    await form.getByLabel('Name').fill('search');
    await form.getByLabel('URL (Streamable HTTP)').fill(up.url);
    await form.getByLabel('Auth').selectOption('headers');
    await form.getByLabel(/Headers, one per line/).fill(`x-api-key: ${SECRET}`);
    await form.getByLabel('Credits per call').fill('500');
    await form.getByLabel('Tools', { exact: true }).selectOption('deny');
    await form.getByLabel(/Tool names/).fill('admin');
    await form.getByRole('button', { name: 'Add server' }).click();
    const row = page.locator('tr[data-server="search"]');
    await row.waitFor();
    assert.match(await row.innerText(), /headers: x-api-key[\s\S]*all but admin[\s\S]*500/);
    assert.ok(!(await page.content()).includes(SECRET), 'the secret is not shown');

    await row.getByRole('button', { name: 'Test' }).click();
    const tools = page.getByRole('region', { name: 'Tools of search' });
    await tools.locator('tr[data-tool="web"]').waitFor();
    assert.match(await tools.locator('tr[data-tool="web"]').innerText(), /search__web[\s\S]*active/);
    assert.match(await tools.locator('tr[data-tool="admin"]').innerText(), /disabled/);
    await tools.getByLabel('Price of news').fill('2000');
    const [saved] = await Promise.all([page.waitForResponse((r) => r.url().includes('/v1/mcp/servers/update')), tools.getByRole('button', { name: 'Save tool prices' }).click()]);
    assert.equal(saved.status(), 200, await saved.text());
    const listed = (await admin.get('/v1/mcp/servers/list?city_id=shop')).body.items[0];
    assert.deepEqual(listed.prices, { news: 2000 });

    // a user of the city calls two tools through /v1/mcp
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: 'shop', user_id: 'uma' })).body.user_token as string;
    await admin.post('/v1/balance/adjust', { city_id: 'shop', user_id: 'uma', credits: 10_000, reason: 'test', idempotency_key: 'uma-1' });
    const c = new Client({ name: 'console-test', version: '1' });
    await c.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    assert.deepEqual((await c.listTools()).tools.map((t) => t.name), ['search__web', 'search__news']);
    await c.callTool({ name: 'search__web', arguments: { text: 'a' } });
    await c.callTool({ name: 'search__web', arguments: { text: 'b' } });
    await c.callTool({ name: 'search__news', arguments: {} });
    await c.close();
    const usage = page.getByRole('region', { name: 'Tool usage' });
    await until('the calls are listed', async () => {
      await usage.getByRole('button', { name: 'Refresh' }).click();
      return (await usage.getByTestId('mcp-usage-totals').count()) === 1 && /search__news/.test(await usage.getByTestId('mcp-usage-totals').innerText());
    });
    const totals = await usage.getByTestId('mcp-usage-totals').innerText();
    assert.match(totals, /search__web\s+2\s+0\s+1,000/);
    assert.match(totals, /search__news\s+1\s+0\s+2,000/);
    await shot(page, 'mcp-tools-1280');
    await page.setViewportSize(PHONE);
    await shot(page, 'mcp-tools-390');
    await ctx.close();
  });

  test('a bureau sees only its own city’s servers', async () => {
    const bureau = (await admin.post('/v1/bureaus/create', { city_id: 'other', name: 'backend' })).body.bureau_token as string;
    const { ctx, page } = await open();
    await signIn(page, bureau);
    await gotoPage(page, 'mcp');
    await page.getByText('No MCP servers for this city yet.').waitFor();
    assert.equal(await page.locator('tr[data-server]').count(), 0);
    await ctx.close();
    assert.deepEqual(outside, []);
    assert.deepEqual(pageErrors, []);
  });
});
