// Browser tests run in Debian's chromium (never a downloaded browser) through playwright-core.
// Where /usr/bin/chromium is missing they skip as one test with one line that says how to run
// them; .ci/run installs chromium, so CI always runs them.
import { accessSync, constants } from 'node:fs';
import { describe, test } from 'node:test';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = process.env.CITYGATE_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** Why browser tests cannot run here, or null when they can. */
export function chromiumMissing(): string | null {
  try {
    accessSync(CHROMIUM, constants.X_OK);
    return null;
  } catch {
    return `${CHROMIUM} is missing: apt-get install chromium runs the browser tests`;
  }
}

/** describe() when chromium is here; otherwise one skipped test with the reason. */
export function browserSuite(name: string, fn: () => void): void {
  const missing = chromiumMissing();
  if (missing) test(name, { skip: missing }, () => {});
  else describe(name, fn);
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
