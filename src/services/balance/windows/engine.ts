// The windows engine on the credit-lease design (mirrors ../lease.ts). A process takes a slice
// of a scope's allowance in one guarded batch — counted at once as used in this minute's
// bucket, so every window of the scope sees it — serves the holds of calls from the slice in
// memory, and gives back what the slice did not spend once its minute is over (or it is idle)
// and no call of it is in flight. So no call writes to the database, two processes or
// replicas can never take the same credit of a window (the take's guard checks every window
// under the scope row's lock), and a call counts in the minute its credits were taken:
//
//   Σ of what calls spent in any window ≤ its limit, at every moment, on every replica.
//
// A window of `seconds` counts the buckets of the last ⌈seconds/60⌉ + 1 minutes: a credit
// stays counted at least `seconds` and at most a minute longer (the precision). A process that
// dies with a slice leaves the slice counted as used until it leaves the window (bounded: 16
// holds and at most half of what the window had left); a graceful stop returns every slice.
//
// On Workers (no graceful stop: an isolate may vanish with its slice) a slice is exactly one
// call's hold, and its rest is returned right after the call, in its waitUntil.
import { newId } from '../../../kernel/crypto.ts';
import type { GatewayContext } from '../../../kernel/context.ts';
import { isUniqueViolation, type Db } from '../../../db/database.ts';
import { BUCKET_MS, windowClock, type RollingWindows, type WindowHold, type WindowRefusal, type WindowSpec, type WindowState } from '../../../kernel/windows.ts';
import { bucketsOf, minuteOf, parseRead, readStatement, returnStatements, takeStatements, type TakeRead } from './sql.ts';
import { sql, type CompiledQuery } from 'kysely';

const SLICE_HOLDS = 16;
const IDLE_MS = 1000;
const DEFAULT_FLUSH_MS = 200;

interface Slice {
  scope: string;
  minute: number;
  taken: number;
  held: number;
  spent: number;
  lastUse: number;
  /** In a return batch in flight. */
  returning: boolean;
}

interface ScopeState {
  scope: string;
  /** The slice of the current minute, if any; older slices wait in `#old` for their calls. */
  current: Slice | null;
  taking: Promise<TakeRead & { windows: readonly WindowSpec[]; minute: number }> | null;
  /** What the windows had left at the last take (sizes the next slice). */
  left: number | null;
}

type SliceHold = WindowHold & { [k: symbol]: Slice | undefined };

const free = (s: Slice) => s.taken - s.held - s.spent;

export class WindowEngine implements RollingWindows {
  readonly gw: GatewayContext;
  readonly now: () => number;
  readonly owner = newId('win', 12);
  #scopes = new Map<string, ScopeState>();
  #old = new Set<Slice>();
  #key = Symbol('window slice');
  #timer: ReturnType<typeof setTimeout> | null = null;
  #flushing: Promise<void> | null = null;
  #retry: { id: string; statements: CompiledQuery[]; slices: Slice[] } | null = null;
  #stopped = false;

  constructor(gw: GatewayContext) {
    this.gw = gw;
    this.now = windowClock(gw);
  }

  get db(): Db {
    return this.gw.db;
  }

  get #flushMs(): number {
    const n = Number(this.gw.env.get('BALANCE_FLUSH_MS') ?? DEFAULT_FLUSH_MS);
    return Number.isFinite(n) && n > 0 ? n : DEFAULT_FLUSH_MS;
  }

  /** Slices only where the process stops gracefully; elsewhere a slice is the call's own hold. */
  get #sliced(): boolean {
    return this.gw.config.gracefulStop && !this.#stopped;
  }

  async reserve(scope: string, windows: readonly WindowSpec[], credits: number): Promise<WindowHold | WindowRefusal> {
    credits = Math.max(0, Math.ceil(credits));
    let waitUntil = 0;
    for (;;) {
      const minute = minuteOf(this.now());
      const st = this.#state(scope);
      if (st.current && st.current.minute !== minute) this.#retire(st);
      const s = st.current;
      if (s && free(s) >= credits) {
        s.held += credits;
        s.lastUse = Date.now();
        const hold: SliceHold = { scope, credits };
        hold[this.#key] = s;
        return hold;
      }
      const missing = credits - (s ? free(s) : 0);
      st.taking ??= this.#take(st, windows, minute, missing, credits).finally(() => (st.taking = null));
      const got = await st.taking;
      if (got.took > 0 && got.minute === minute) continue;
      if (got.minute !== minute || got.windows !== windows) continue; // another call's take: look again
      // Refused. Credits other live processes hold in slices of this minute may come back
      // within an idle period and a flush: wait that long before refusing (no false 429).
      const mine = s ? s.taken : 0;
      const elsewhere = Math.max(0, got.open - mine);
      const short = this.#blocking(windows, got, missing);
      if (!short) continue;
      if (elsewhere > 0 && short.window.remaining + elsewhere >= missing) {
        waitUntil ||= Date.now() + IDLE_MS + 3 * this.#flushMs + 500;
        if (Date.now() < waitUntil) {
          await new Promise((r) => setTimeout(r, 50));
          continue;
        }
      }
      return short;
    }
  }

  settle(hold: WindowHold, credits: number): number {
    const s = (hold as SliceHold)[this.#key];
    if (!s) return 0;
    (hold as SliceHold)[this.#key] = undefined;
    s.held -= hold.credits;
    const cost = Math.max(0, Math.ceil(credits));
    // An overrun beyond the hold is counted as far as the slice's free part goes.
    const counted = Math.min(cost, hold.credits + Math.max(0, free(s)));
    s.spent += counted;
    s.lastUse = Date.now();
    this.#afterCall();
    return cost - counted;
  }

  release(hold: WindowHold): void {
    const s = (hold as SliceHold)[this.#key];
    if (!s) return;
    (hold as SliceHold)[this.#key] = undefined;
    s.held -= hold.credits;
    s.lastUse = Date.now();
    this.#afterCall();
  }

  async state(scope: string, windows: readonly WindowSpec[]): Promise<WindowState[]> {
    const minute = minuteOf(this.now());
    const res = await this.db.batch([readStatement(this.db, scope, windows, minute)]);
    const r = parseRead(res[0].rows[0] as Record<string, unknown> | undefined, windows.length);
    return windows.map((w, i) => stateOf(w, r.used[i], r.oldest[i]));
  }

  #state(scope: string): ScopeState {
    let st = this.#scopes.get(scope);
    if (!st) this.#scopes.set(scope, (st = { scope, current: null, taking: null, left: null }));
    return st;
  }

  /** The current slice's minute is over: it takes no more calls and goes back once they end. */
  #retire(st: ScopeState): void {
    if (st.current) this.#old.add(st.current);
    st.current = null;
    this.#schedule();
  }

  async #take(st: ScopeState, windows: readonly WindowSpec[], minute: number, missing: number, hold: number) {
    const want = this.#sliced ? hold * SLICE_HOLDS : missing;
    let amount = st.left === null ? want : sliceOf(missing, want, st.left, hold);
    for (let attempt = 0; ; attempt++) {
      const takeId = newId('wt', 12);
      const at = this.now();
      const { statements, read } = takeStatements(this.db, st.scope, windows, minute, amount, takeId, at);
      const res = await this.db.batch(statements);
      const r = read(res[res.length - 1].rows as Record<string, unknown>[]);
      st.left = Math.min(...windows.map((w, i) => w.limit - r.used[i]));
      if (r.took > 0) {
        if (st.current && st.current.minute !== minute) this.#retire(st);
        if (st.current) st.current.taken += amount;
        else st.current = { scope: st.scope, minute, taken: amount, held: 0, spent: 0, lastUse: Date.now(), returning: false };
        this.#schedule();
        return { ...r, took: amount, windows, minute };
      }
      // Did not fit: try once more with what is left, if that still covers what is missing.
      if (attempt >= 2 || st.left < missing) return { ...r, took: 0, windows, minute };
      amount = sliceOf(missing, want, st.left, hold);
    }
  }

  /** The first window the missing credits do not fit, as a refusal. */
  #blocking(windows: readonly WindowSpec[], r: TakeRead, missing: number): WindowRefusal | null {
    let worst: WindowRefusal | null = null;
    windows.forEach((w, i) => {
      if (w.limit - r.used[i] >= missing) return;
      const state = stateOf(w, r.used[i], r.oldest[i]);
      const retryAfterMs = state.resets_at === null ? null : Math.max(1000, state.resets_at - this.now());
      // The one that frees last decides when the call can go through.
      if (!worst || retryAfterMs === null || (worst.retryAfterMs !== null && retryAfterMs > worst.retryAfterMs)) worst = { refused: true, window: state, retryAfterMs };
    });
    return worst;
  }

  // ---- returning slices ----------------------------------------------------------------

  #afterCall(): void {
    if (!this.#sliced) this.gw.waitUntil(this.flush());
    else this.#schedule();
  }

  #schedule(): void {
    if (this.#timer || this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.flush().finally(() => {
        if (this.#old.size > 0 || [...this.#scopes.values()].some((s) => s.current)) this.#schedule();
      });
    }, this.#flushMs);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  flush(final = false): Promise<void> {
    const run = (this.#flushing ?? Promise.resolve()).then(() => this.#flushOnce(final));
    const tracked = run.finally(() => {
      if (this.#flushing === tracked) this.#flushing = null;
    });
    this.#flushing = tracked;
    return tracked;
  }

  async #flushOnce(final: boolean): Promise<void> {
    let f = this.#retry;
    if (!f) {
      const at = Date.now();
      const minute = minuteOf(this.now());
      const slices: Slice[] = [];
      for (const st of this.#scopes.values()) {
        const s = st.current;
        if (s && s.held === 0 && !st.taking && (final || !this.#sliced || s.minute !== minute || at - s.lastUse >= IDLE_MS)) {
          st.current = null;
          slices.push(s);
        }
        if (!st.current && !st.taking) this.#scopes.delete(st.scope);
      }
      for (const s of this.#old) if (s.held === 0) slices.push(s);
      if (slices.length === 0) return;
      slices.sort((a, b) => (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : a.minute - b.minute)); // one lock order
      const id = newId('wflush', 12);
      // The mark first (lease_flushes, as lease flushes do): a retry of a batch that had committed fails on it.
      const statements = [sql`INSERT INTO lease_flushes (flush_id, owner, at) VALUES (${id}, ${this.owner}, ${at})`.compile(this.db.kysely)];
      for (const s of slices) {
        s.returning = true;
        this.#old.delete(s);
        statements.push(...returnStatements(this.db, s.scope, s.minute, s.taken, Math.max(0, s.taken - s.spent), this.now()));
      }
      f = this.#retry = { id, statements, slices };
    }
    try {
      await this.db.batch(f.statements);
    } catch (e) {
      if (!isUniqueViolation(e)) {
        if (!this.gw.databaseDown(e)) this.gw.log('warn', 'windows: returning slices failed, retrying', { error: String(e) });
        if (!this.#stopped) this.#schedule();
        return;
      }
    }
    this.#retry = null;
  }

  /** What this process holds (tests, metrics). */
  get held(): { scopes: number; slices: number } {
    let slices = this.#old.size;
    for (const st of this.#scopes.values()) if (st.current) slices++;
    return { scopes: this.#scopes.size, slices };
  }

  /** Graceful stop: returns every slice (waits briefly for calls in flight). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const deadline = Date.now() + 5000;
    for (;;) {
      await this.flush(true).catch((e) => this.gw.log('error', 'windows: final flush failed', { error: String(e) }));
      if (this.held.slices === 0 && !this.#retry) return;
      if (Date.now() > deadline) {
        this.gw.log('error', 'windows: stopped with slices still open; they stay counted until they leave their windows', this.held);
        return;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** At least what is missing, else up to `want` and half of what is left, in whole holds. */
function sliceOf(missing: number, want: number, left: number, hold: number): number {
  const half = Math.floor(Math.min(want, Math.floor(left / 2)) / hold) * hold;
  return Math.max(missing, half);
}

export function stateOf(w: WindowSpec, used: number, oldest: number | null): WindowState {
  const seconds = w.seconds ?? null;
  const resets = seconds ? (oldest === null ? null : (oldest + bucketsOf(seconds)) * BUCKET_MS) : (w.until ?? null);
  return {
    name: w.name ?? (seconds ? `${seconds}s` : w.since !== undefined ? 'period' : 'total'),
    seconds,
    limit: w.limit,
    used,
    remaining: Math.max(0, w.limit - used),
    resets_at: resets,
  };
}
