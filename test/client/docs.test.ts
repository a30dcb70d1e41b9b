// GET /docs renders the API reference in a real browser (Debian's chromium, headless, driven
// by playwright-core), from the gateway alone: no request leaves 127.0.0.1.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { browserSuite, launchChromium } from '../helpers/browser.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
// Git-ignored; CI may keep it as an artifact.
const SHOTS = resolve(import.meta.dirname, '../../test-results');

browserSuite('/docs in chromium', () => {
  let gw: TestGateway;
  let browser: Browser;

  before(async () => {
    gw = await startGateway();
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await gw?.stop();
  });

  test('/docs renders the reference with every mounted service listed, offline', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const outside: string[] = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.protocol.startsWith('http') && u.hostname !== '127.0.0.1') outside.push(r.url());
    });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const failed: string[] = [];
    page.on('response', (r) => {
      if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) failed.push(`${r.status()} ${r.url()}`);
    });
    const res = await page.goto(`${gw.url}/docs`);
    assert.equal(res?.status(), 200);
    const services: string[] = (await (await fetch(`${gw.url}/health`)).json()).services;
    // Scalar lists each tag (one per service) in its sidebar and as a section.
    await page.getByText('Write one env variable').first().waitFor({ timeout: 20_000 });
    const text = await page.locator('body').innerText();
    for (const s of services) assert.match(text, new RegExp(`\\b${s}\\b`, 'i'), `service ${s} is not listed`);
    mkdirSync(SHOTS, { recursive: true });
    const shot = join(SHOTS, 'docs.png');
    await page.screenshot({ path: shot, fullPage: false });
    assert.ok(existsSync(shot));
    assert.deepEqual(outside, [], 'the page loads nothing from outside the gateway');
    assert.deepEqual(errors, []);
    assert.deepEqual(failed, [], 'every resource the page loads exists');
    await page.close();
  });
});
