// Polling for what a test waits on (background writes, jobs, sweeps).
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a truthy value; throws naming `what` after `timeoutMs`. */
export async function until<T>(what: string, fn: () => Promise<T | null | undefined | false> | T, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}
