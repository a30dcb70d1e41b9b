// Polling for what a test waits on (background writes, jobs, sweeps).
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `fn` until it returns a truthy value; throws naming `what` after `timeoutMs`. The
 * default deadline is generous: it only bounds a test that would otherwise hang, and a loaded
 * machine (two cores, several suites at once) must not turn a slow event into a failure.
 */
export async function until<T>(what: string, fn: () => Promise<T | null | undefined | false> | T, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * Waits until the UTC day is at least `marginMs` away from its end, so the records a test is
 * about to write all fall on one day. Tests then read that day from the records themselves.
 */
export async function awayFromMidnight(marginMs = 120_000): Promise<void> {
  const now = Date.now();
  const left = 86_400_000 - (now % 86_400_000);
  if (left < marginMs) await sleep(left + 1000);
}
