// Shared by the console's browser tests: contexts that record every request to another origin
// and every page error, signing in, going to a page, and full-page screenshots under
// test-results/console/.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';

export const SHOTS = resolve(import.meta.dirname, '../../test-results/console');
export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };

export interface ConsolePages {
  /** Requests the pages made to any other origin (must stay empty). */
  outside: string[];
  /** Uncaught page errors and console errors (must stay empty). */
  pageErrors: string[];
  open(viewport?: { width: number; height: number }): Promise<{ ctx: BrowserContext; page: Page }>;
  signIn(page: Page, key: string): Promise<void>;
  gotoPage(page: Page, hash: string): Promise<void>;
  shot(page: Page, name: string): Promise<void>;
}

/** Helpers bound to a gateway and a browser, read when called (both start in before()). */
export function consolePages(env: () => { url: string; browser: Browser }): ConsolePages {
  const outside: string[] = [];
  const pageErrors: string[] = [];
  return {
    outside,
    pageErrors,
    async open(viewport = DESKTOP) {
      const { url, browser } = env();
      const ctx = await browser.newContext({ viewport, acceptDownloads: true });
      await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url });
      const page = await ctx.newPage();
      const origin = new URL(url).origin;
      page.on('request', (r) => {
        const u = r.url();
        if (!u.startsWith('data:') && !u.startsWith('blob:') && new URL(u).origin !== origin) outside.push(u);
      });
      page.on('pageerror', (e) => pageErrors.push(String(e)));
      page.on('console', (m) => {
        // API refusals the page shows (403 paused, a 400 for a bad value) are logged by
        // chromium as "Failed to load resource"; anything else is a page error.
        if (m.type() === 'error' && !/Failed to load resource: the server responded with a status of (4\d\d)/.test(m.text())) pageErrors.push(m.text());
      });
      return { ctx, page };
    },
    async signIn(page, key) {
      await page.goto(`${env().url}/console`);
      await page.getByLabel('Admin key or bureau token').fill(key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('navigation', { name: 'Pages' }).waitFor();
    },
    async gotoPage(page, hash) {
      await page.goto(`${env().url}/console/#/${hash}`);
      await page.locator('main.content h1').first().waitFor();
    },
    async shot(page, name) {
      mkdirSync(SHOTS, { recursive: true });
      await page.waitForLoadState('networkidle');
      await page.locator('[aria-busy="true"]').first().waitFor({ state: 'detached', timeout: 10_000 }).catch(() => {});
      // From the top: a full-page shot of a scrolled page draws the sticky phone bar mid-page.
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
    },
  };
}
