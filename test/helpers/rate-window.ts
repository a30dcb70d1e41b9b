// Rate limits count in fixed one-minute windows aligned to the clock's minute (rate-limit.ts).
// A burst that straddles a boundary may rightly be served up to twice the limit, so a test that
// counts what one window serves first waits until the current window has enough time left.
import { sleep } from './wait.ts';

const WINDOW_MS = 60_000;

/** Waits, if needed, for the next window to begin, so that at least `needMs` of it is left. */
export async function freshWindow(needMs = 20_000): Promise<void> {
  const left = WINDOW_MS - (Date.now() % WINDOW_MS);
  if (left < needMs) await sleep(left + 50);
}
