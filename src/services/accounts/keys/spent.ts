// What a key with a budget has spent: in its rolling window (the last day, week or 30 days) or
// in total. Read from the calls' usage records (which carry key_id), so it trails a call by the
// usage flush (about 250 ms).
import { sql } from 'kysely';
import type { GatewayContext } from '../../../kernel/context.ts';

export interface Spent {
  credits: number;
  window_start?: string;
  resets_at?: string;
}

export async function keySpending(gw: GatewayContext, keys: { id: string; windowMs: number | null }[], now = Date.now()): Promise<Map<string, Spent>> {
  const out = new Map<string, Spent>();
  for (const k of keys) {
    const from = k.windowMs === null ? 0 : now - k.windowMs;
    const row = await gw.db.kysely
      .selectFrom('usage')
      .select(sql<number | null>`SUM(credits)`.as('credits'))
      .where('key_id', '=', k.id)
      .where('created_at', '>=', from)
      .executeTakeFirst();
    const s: Spent = { credits: Number(row?.credits ?? 0) };
    if (k.windowMs !== null) s.window_start = new Date(from).toISOString();
    out.set(k.id, s);
  }
  return out;
}
