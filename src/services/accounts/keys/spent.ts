// What a key with a budget has spent in its window (the last day, week or 30 days) or in total,
// as the rolling-windows engine counts it (kernel/windows.ts, scope `key:<id>`): credits that
// processes have taken for calls still in flight count too, until the calls end (about a second).
import type { GatewayContext } from '../../../kernel/context.ts';
import { keyBudget } from '../../../kernel/user-keys.ts';
import { WINDOWS, type RollingWindows } from '../../../kernel/windows.ts';
import type { KeyRow } from './store.ts';

export interface Spent {
  credits: number;
  window_start?: string;
  resets_at?: string;
}

export async function keySpent(gw: GatewayContext, r: KeyRow): Promise<Spent | null> {
  if (r.budget_credits == null) return null;
  const windows = gw.use<RollingWindows>(WINDOWS);
  if (!windows) return { credits: 0 };
  const budget = keyBudget(Number(r.budget_credits), (r.budget_window as 'day' | 'week' | '30d' | null) ?? null);
  const [w] = await windows.state(`key:${r.key_id}`, budget.windows);
  const s: Spent = { credits: w.used };
  if (w.seconds !== null) s.window_start = new Date(windows.now() - w.seconds * 1000).toISOString();
  if (w.resets_at !== null) s.resets_at = new Date(w.resets_at).toISOString();
  return s;
}
