// Token counters of the rate limits, without a statement per event-loop turn: the tokens calls
// used wait in memory per counter key and go out every FLUSH_MS as one UPSERT … RETURNING per
// key set (CounterBatch), and admissions read a per-key count that is at most REFRESH_MS old
// (a plain SELECT when it is older, started in the background from half that age on; a
// write's RETURNING refreshes it too) plus this process's own tokens not yet written. So this process sees its own tokens at once, and another
// process's (or replica's) within REFRESH_MS of their write, i.e. within FLUSH_MS + REFRESH_MS
// of the call that used them.
//
// A runtime without a graceful stop (a Worker: nothing may wait on a timer that outlives the
// request) writes each call's tokens right away, in that call's background work (writeThrough).
import type { CounterBatch } from './counter-batch.ts';

/** How long a count read from the database may serve admissions. */
export const REFRESH_MS = 100;
/** How long used tokens wait in memory before they are written (with every other key's). */
export const FLUSH_MS = 100;

/** One counter key in one window. */
interface State {
  key: string;
  windowStart: number;
  /** The count in the database as last read or written (grows within a window). */
  stored: number;
  /** When `stored` was learnt (0: never). */
  at: number;
  /** This process's tokens not yet handed to a write, and those in writes under way. */
  unsent: number;
  sending: number;
  reading: Promise<void> | null;
  dirty: boolean;
}

export class TokenCounts {
  readonly batch: CounterBatch;
  readonly writeThrough: boolean;
  /** key → its state in the latest window seen. */
  #states = new Map<string, State>();
  /** States with unsent tokens (an older window's too: each is written to its own window). */
  #dirty: State[] = [];
  #timer: Promise<void> | null = null;
  #keepAlive: (p: Promise<unknown>) => void;

  /** keepAlive: the runtime's hold on a read started in the background (gw.waitUntil). */
  constructor(batch: CounterBatch, writeThrough: boolean, keepAlive: (p: Promise<unknown>) => void) {
    this.batch = batch;
    this.writeThrough = writeThrough;
    this.#keepAlive = keepAlive;
  }

  /**
   * The key's count in the window if known fresh enough; undefined: call read. Past half the
   * refresh interval a read starts in the background, so a busy key is never waited for.
   */
  peek(key: string, windowStart: number, now: number): number | undefined {
    const s = this.#states.get(key);
    if (!s || s.windowStart !== windowStart) return undefined;
    const age = now - s.at;
    if (age >= REFRESH_MS) return undefined;
    if (age >= REFRESH_MS / 2 && !s.reading) this.#keepAlive(this.#refresh(s));
    return s.stored + s.unsent + s.sending;
  }

  /** The key's count in the window, read from the database (one read per key at a time). */
  async read(key: string, windowStart: number): Promise<number> {
    const s = this.#state(key, windowStart);
    await this.#refresh(s);
    return s.stored + s.unsent + s.sending;
  }

  #refresh(s: State): Promise<void> {
    return (s.reading ??= this.batch.add(s.key, 0, s.windowStart).then(
      (n) => {
        s.stored = Math.max(s.stored, n);
        s.at = Date.now();
        s.reading = null;
      },
      (e: unknown) => {
        s.reading = null;
        throw e;
      },
    ));
  }

  /**
   * Counts tokens a call used. The promise, when there is one, is the write that will carry
   * them (the runtime keeps it alive: gw.waitUntil); null when a write is already scheduled.
   */
  add(key: string, tokens: number, windowStart: number): Promise<void> | null {
    const s = this.#state(key, windowStart);
    s.unsent += tokens;
    if (this.writeThrough) return this.#send(s);
    if (!s.dirty) {
      s.dirty = true;
      this.#dirty.push(s);
    }
    if (this.#timer) return null;
    return (this.#timer = new Promise<void>((resolve) => setTimeout(resolve, FLUSH_MS)).then(() => this.#flush()));
  }

  async #flush(): Promise<void> {
    const dirty = this.#dirty;
    this.#dirty = [];
    this.#timer = null;
    // Sent in one turn: CounterBatch makes them one UPSERT per window.
    await Promise.all(
      dirty.map((s) => {
        s.dirty = false;
        return this.#send(s);
      }),
    );
  }

  async #send(s: State): Promise<void> {
    const n = s.unsent;
    if (n === 0) return;
    s.unsent = 0;
    s.sending += n;
    try {
      const after = await this.batch.add(s.key, n, s.windowStart);
      s.stored = Math.max(s.stored, after);
      s.at = Date.now();
    } finally {
      s.sending -= n;
    }
  }

  /** The key's state in the window (a new window starts unknown: `at` 0 makes it read first). */
  #state(key: string, windowStart: number): State {
    const s = this.#states.get(key);
    // An older window's state stays reachable from #dirty until its tokens are written; a call
    // counted just after its window turned (windowStart older than the state's) counts in the newer one.
    if (s && s.windowStart >= windowStart) return s;
    if (this.#states.size > 100_000) this.#states.clear();
    const fresh: State = { key, windowStart, stored: 0, at: 0, unsent: 0, sending: 0, reading: null, dirty: false };
    this.#states.set(key, fresh);
    return fresh;
  }
}
