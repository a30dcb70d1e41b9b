// Rolling-window allowances: the capability the balance service offers (balance/windows/) and
// plans and key budgets use. A scope ('sub:<subscription id>', 'key:<key id>') has any number
// of windows, each a limit in credits over the last `seconds`, since a moment (a paid period),
// or in total; a reservation fits every window of its scope or is refused, exactly, across
// processes and replicas.
import type { GatewayContext } from './context.ts';

export const WINDOWS = 'windows';

/** Windows are counted in buckets of one UTC minute. */
export const BUCKET_MS = 60_000;

export interface WindowSpec {
  /** Rolling: the last this many seconds (≥ 60). Absent or null: since `since` (or in total when `since` is absent too). */
  seconds?: number | null;
  /** Credits the window allows. */
  limit: number;
  /** Epoch ms the window counts from (a paid period); it ends at `until` (only shown, and as Retry-After). */
  since?: number;
  until?: number;
  /** A name for errors and views, e.g. '5h' or 'period'. */
  name?: string;
}

export interface WindowState {
  name: string;
  seconds: number | null;
  limit: number;
  used: number;
  remaining: number;
  /** When credits of this window next come back (rolling: the oldest credits counted leave); null: never by itself. */
  resets_at: number | null;
}

/** A reservation inside a scope's windows: settle or release it exactly once. */
export interface WindowHold {
  scope: string;
  credits: number;
}

/** The reservation did not fit: the window it did not fit and when it frees (ms; null: not by itself). */
export interface WindowRefusal {
  refused: true;
  window: WindowState;
  retryAfterMs: number | null;
}

export interface RollingWindows {
  /** Reserves `credits` in every window of `scope`; no database write per call (a slice of each window is leased). */
  reserve(scope: string, windows: readonly WindowSpec[], credits: number): Promise<WindowHold | WindowRefusal>;
  /** Counts `credits` (the measured cost) and frees the rest of the hold; returns the part the windows could not take (an overrun). */
  settle(hold: WindowHold, credits: number): number;
  release(hold: WindowHold): void;
  /** Each window's used, limit and reset time now (slices that live processes hold count as used until they are returned). */
  state(scope: string, windows: readonly WindowSpec[]): Promise<WindowState[]>;
  /** The clock windows are counted by (Date.now(), or the test clock). */
  now(): number;
}

/**
 * The windows' clock: Date.now(), moved by TEST_CLOCK_OFFSET_MS (env table or process env) only
 * when the process was started with CITYGATE_TEST_HOOKS=1, so tests can let a 5-hour window
 * pass without waiting and no deployment can move it.
 */
export function windowClock(gw: GatewayContext): () => number {
  if (typeof process === 'undefined' || process.env?.CITYGATE_TEST_HOOKS !== '1') return Date.now;
  return () => Date.now() + (Number(gw.env.get('TEST_CLOCK_OFFSET_MS') ?? 0) || 0);
}
