// What credit leases (lease.ts) and window slices (windows/engine.ts) share: both serve calls
// from a slice a process took, write what the calls did in one batch every BALANCE_FLUSH_MS,
// one batch at a time, and give an idle slice back after IDLE_MS.
import type { GatewayContext } from '../../kernel/context.ts';

export const DEFAULT_FLUSH_MS = 200;
/** A slice with no call in flight for this long goes back. */
export const IDLE_MS = 1000;

/** A positive number from a setting, else the fallback. */
export function positive(v: string | undefined, fallback: number): number {
  const n = Number(v ?? fallback);
  return Number.isFinite(n) && n > 0 ? n : fallback;
}

/** BALANCE_FLUSH_MS, read at each use (the env table may change it). */
export const flushMsOf = (gw: GatewayContext) => positive(gw.env.get('BALANCE_FLUSH_MS'), DEFAULT_FLUSH_MS);

/**
 * How long a call waits for what another live process holds in an idle slice before it is
 * refused: the time such a slice takes to come back (IDLE_MS and three flushes), and half a
 * second more.
 */
export const elsewhereWaitMs = (flushMs: number) => IDLE_MS + 3 * flushMs + 500;

/**
 * One periodic flush, never two at once: `schedule()` asks for one within `everyMs()` (and
 * again after it while `more()`), `flush()` runs one now, after any in progress. After
 * `stop()` nothing is scheduled any more; `flush()` still runs (the final one).
 */
export class SerialFlusher {
  readonly #run: (final: boolean) => Promise<void>;
  readonly #everyMs: () => number;
  readonly #more: () => boolean;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #flushing: Promise<void> | null = null;
  #stopped = false;

  constructor(o: { run: (final: boolean) => Promise<void>; everyMs: () => number; more: () => boolean }) {
    this.#run = o.run;
    this.#everyMs = o.everyMs;
    this.#more = o.more;
  }

  schedule(): void {
    if (this.#timer || this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.flush().finally(() => {
        if (this.#more()) this.schedule();
      });
    }, this.#everyMs());
    (this.#timer as { unref?: () => void }).unref?.();
  }

  flush(final = false): Promise<void> {
    const run = (this.#flushing ?? Promise.resolve()).then(() => this.#run(final));
    const tracked = run.finally(() => {
      if (this.#flushing === tracked) this.#flushing = null;
    });
    this.#flushing = tracked;
    return tracked;
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
