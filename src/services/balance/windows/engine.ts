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
// stays counted at least `seconds` and at most a minute longer (the precision). Each slice is a
// row of window_slices too: a process that dies with one has it swept by another after the TTL,
// which gives back what the scope's usage records do not account for; a graceful stop returns
// every slice.
//
// On Workers (no graceful stop: an isolate may vanish with its slice) a slice is exactly one
// call's hold, and its rest is returned right after the call, in its waitUntil.
import { newId } from '../../../kernel/crypto.ts';
import type { GatewayContext } from '../../../kernel/context.ts';
import { isUniqueViolation, type Db } from '../../../db/database.ts';
import { BUCKET_MS, windowClock, type RollingWindows, type WindowHold, type WindowRefusal, type WindowSpec, type WindowState } from '../../../kernel/windows.ts';
import { bucketsOf, giveBackStatements, keepFrom, minuteOf, parseRead, pruneStatement, readStatement, returnStatements, sweepStatements, takeStatements, type TakeRead } from './sql.ts';
import { sql, type CompiledQuery } from 'kysely';
import { elsewhereWaitMs, flushMsOf, IDLE_MS, SerialFlusher } from '../flusher.ts';

const SLICE_HOLDS = 16;
/** How often a process removes a scope's buckets that no window reads any more (with a take). */
const PRUNE_EVERY_MS = 3_600_000;
const DEFAULT_TTL_S = 30;
const SWEEP_EVERY_MS = 10_000;

interface Slice {
  scope: string;
  minute: number;
  taken: number;
  held: number;
  spent: number;
  lastUse: number;
  /** In a return batch in flight. */
  returning: boolean;
  /** Free credits of a past minute's slice in a give-back batch not yet committed. */
  giving: number;
}

interface ScopeState {
  scope: string;
  /** The slice of the current minute, if any; older slices wait in `#old` for their calls. */
  current: Slice | null;
  taking: Promise<TakeRead & { windows: readonly WindowSpec[]; minute: number }> | null;
  /** What the windows had left at the last take (sizes the next slice), and the tightest one's name. */
  left: number | null;
  tightest: string;
}

type SliceHold = WindowHold & { [k: symbol]: Slice | undefined };

const free = (s: Slice) => s.taken - s.held - s.spent;

export class WindowEngine implements RollingWindows {
  readonly gw: GatewayContext;
  readonly now: () => number;
  readonly owner = newId('win', 12);
  #scopes = new Map<string, ScopeState>();
  /** When this process last pruned each scope's old buckets. */
  #pruned = new Map<string, number>();
  #old = new Set<Slice>();
  #key = Symbol('window slice');
  readonly #flusher = new SerialFlusher({
    run: (final) => this.#flushOnce(final),
    everyMs: () => this.#flushMs,
    more: () => this.#old.size > 0 || [...this.#scopes.values()].some((s) => s.current),
  });
  #retry: { id: string; statements: CompiledQuery[]; slices: Slice[]; partial: Slice[] } | null = null;
  #stopped = false;

  constructor(gw: GatewayContext) {
    this.gw = gw;
    this.now = windowClock(gw);
  }

  get db(): Db {
    return this.gw.db;
  }

  get #flushMs(): number {
    return flushMsOf(this.gw);
  }

  /** Slices only where the process stops gracefully; elsewhere a slice is the call's own hold. */
  get #sliced(): boolean {
    return this.gw.config.gracefulStop && !this.#stopped;
  }

  async reserve(scope: string, windows: readonly WindowSpec[], credits: number): Promise<WindowHold | WindowRefusal> {
    credits = Math.max(0, Math.ceil(credits));
    if (credits === 0) return { scope, credits: 0 }; // nothing to hold (a free call)
    let waitUntil = 0;
    for (;;) {
      const minute = minuteOf(this.now());
      const st = this.#state(scope);
      if (st.current && st.current.minute !== minute) this.#retire(st);
      const s = st.current;
      if (s && free(s) >= credits) {
        s.held += credits;
        s.lastUse = Date.now();
        const hold: SliceHold = { scope, credits, remaining: Math.max(0, (st.left ?? 0) + free(s)), window: st.tightest };
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
      const cur = st.current as Slice | null;
      const mine = cur && cur.minute === minute ? cur.taken : 0; // this process's own slice is no one else's
      const elsewhere = Math.max(0, got.open - mine);
      // This process's slices of past minutes give back what their calls do not spend: at a
      // minute's turn the credits a call needs may be there (a free part goes back at the next
      // flush, a held one when its call ends).
      const back = this.#comingBack(scope);
      const short = this.#blocking(windows, got, missing);
      if (!short) continue;
      if (elsewhere + back > 0 && short.window.remaining + elsewhere + back >= missing) {
        waitUntil ||= Date.now() + elsewhereWaitMs(this.#flushMs);
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
    if (!st) this.#scopes.set(scope, (st = { scope, current: null, taking: null, left: null, tightest: '' }));
    return st;
  }

  /** What this process's past-minute slices of `scope` may still give back (not yet committed). */
  #comingBack(scope: string): number {
    let n = 0;
    for (const s of this.#old) if (s.scope === scope) n += s.taken - s.spent + s.giving;
    for (const s of this.#retry?.slices ?? []) if (s.scope === scope) n += s.taken - s.spent;
    return n;
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
      const { statements, read } = takeStatements(this.db, st.scope, windows, minute, amount, takeId, at, this.owner, Date.now());
      // Now and then the same batch removes buckets older than every window (after the scope's
      // lock on PostgreSQL): a scope keeps about its longest window's minutes, not all of them.
      const keep = this.now() - (this.#pruned.get(st.scope) ?? 0) >= PRUNE_EVERY_MS ? keepFrom(windows, minute) : null; // the windows' clock
      if (keep !== null) {
        if (this.#pruned.size > 100_000) this.#pruned.clear();
        this.#pruned.set(st.scope, this.now());
        statements.splice(statements.length - 1, 0, pruneStatement(this.db, st.scope, keep));
      }
      const res = await this.db.batch(statements);
      const r = read(res[res.length - 1].rows as Record<string, unknown>[]);
      st.left = Infinity;
      windows.forEach((w, i) => {
        if (w.limit - r.used[i] < st.left!) {
          st.left = w.limit - r.used[i];
          st.tightest = stateOf(w, 0, null).name;
        }
      });
      if (r.took > 0) {
        if (st.current && st.current.minute !== minute) this.#retire(st);
        if (st.current) st.current.taken += amount;
        else st.current = { scope: st.scope, minute, taken: amount, held: 0, spent: 0, lastUse: Date.now(), returning: false, giving: 0 };
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
    if (!this.#stopped) this.#flusher.schedule();
  }

  flush(final = false): Promise<void> {
    return this.#flusher.flush(final);
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
        } else if (s && s.minute !== minute && !st.taking) this.#retire(st); // calls still out: its free part goes below
        if (!st.current && !st.taking) this.#scopes.delete(st.scope);
      }
      // A past minute's slice takes no more calls: what its calls in flight do not hold goes back
      // now (a long call would keep it from the next minute's calls); the rest when they end.
      const partial: Slice[] = [];
      for (const s of this.#old) {
        if (s.held === 0) slices.push(s);
        else if (free(s) > 0 && s.giving === 0) partial.push(s);
      }
      const renew = this.#renewDue(at);
      if (slices.length === 0 && partial.length === 0 && !renew) return;
      const all = [...slices, ...partial].sort((a, b) => (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : a.minute - b.minute)); // one lock order for returns and give-backs alike
      const id = newId('wflush', 12);
      // The mark first (lease_flushes, as lease flushes do): a retry of a batch that had committed fails on it.
      const statements = [sql`INSERT INTO lease_flushes (flush_id, owner, at) VALUES (${id}, ${this.owner}, ${at})`.compile(this.db.kysely)];
      // Live slices say so (every TTL/3), or another process would sweep them.
      if (renew) statements.push(sql`UPDATE window_slices SET renewed_at = ${at} WHERE owner = ${this.owner}`.compile(this.db.kysely));
      for (const s of all) {
        if (s.held > 0) {
          // a give-back (a returned slice has no call out)
          s.giving = free(s);
          s.taken -= s.giving;
          statements.push(...giveBackStatements(this.db, s.scope, s.minute, s.giving, this.now(), this.owner));
          continue;
        }
        s.returning = true;
        this.#old.delete(s);
        statements.push(...returnStatements(this.db, s.scope, s.minute, s.taken, Math.max(0, s.taken - s.spent), this.now(), this.owner));
      }
      f = this.#retry = { id, statements, slices, partial };
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
    for (const s of f.partial) s.giving = 0;
    this.#retry = null;
  }

  get #ttlMs(): number {
    const n = Number(this.gw.env.get('BALANCE_LEASE_TTL_SECONDS') ?? DEFAULT_TTL_S);
    return (Number.isFinite(n) && n > 0 ? n : DEFAULT_TTL_S) * 1000;
  }

  #lastRenew = Date.now();
  #renewDue(at: number): boolean {
    if (this.held.slices === 0 || at - this.#lastRenew < this.#ttlMs / 3) return false;
    this.#lastRenew = at;
    return true;
  }

  #sweeper: ReturnType<typeof setTimeout> | null = null;

  /** A long-lived process sweeps on a timer: dead processes' slices come back with no traffic too. */
  startSweeper(): void {
    if (this.#stopped || this.#sweeper) return;
    this.#sweeper = setTimeout(() => {
      this.#sweeper = null;
      this.gw.waitUntil(this.sweep().catch((e) => this.gw.databaseDown(e) || this.gw.log('warn', 'windows: sweep failed', { error: String(e) })));
      this.startSweeper();
    }, Math.min(SWEEP_EVERY_MS, this.#ttlMs));
    (this.#sweeper as { unref?: () => void }).unref?.();
  }

  /**
   * Gives back the slices of processes that stopped renewing them (they died): each its part
   * that the scope's usage records since it was taken do not account for. Returns how many.
   */
  async sweep(now = Date.now()): Promise<number> {
    const cutoff = now - this.#ttlMs;
    const dead = await this.db.kysely.selectFrom('window_slices').select(['owner', 'scope', 'minute', 'created_at']).where('renewed_at', '<', cutoff).where('owner', '<>', this.owner).limit(500).execute();
    let swept = 0;
    for (const s of dead) {
      const statements = sweepStatements(this.db, { owner: s.owner, scope: s.scope, minute: Number(s.minute), created_at: Number(s.created_at) }, cutoff, newId('wsweep', 12), this.now());
      if (!statements) continue;
      const res = await this.db.batch(statements);
      if (res[res.length - 1].changes === 1) swept++;
    }
    if (swept > 0) this.gw.log('warn', 'windows: gave back the unspent slices of stopped processes', { count: swept });
    return swept;
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
    this.#flusher.stop();
    if (this.#sweeper) clearTimeout(this.#sweeper);
    this.#sweeper = null;
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
