// Shared helpers of the money tests: tokens, and the invariants read straight from the
// database file the way an auditor would.
import { client } from '../helpers/http.ts';
import { sqlAll, sqlGet, type SqlTarget } from '../helpers/sql.ts';
import { sleep, until as waitUntil } from '../helpers/wait.ts';

export type Client = ReturnType<typeof client>;

export async function cityWithUser(admin: Client, cityId: string, userId: string): Promise<string> {
  const c = await admin.post('/v1/cities/create', { name: cityId, city_id: cityId });
  if (c.status !== 200 && c.status !== 409) throw new Error(`city create: ${c.status} ${c.text}`);
  const t = await admin.post('/v1/cities/tokens/apply', { city_id: cityId, user_id: userId });
  if (t.status !== 200) throw new Error(`token apply: ${t.status} ${t.text}`);
  return t.body.user_token;
}

/** A SQL target from a gateway, or a SQLite file path. */
const target = (t: SqlTarget | string): SqlTarget => (typeof t === 'string' ? { dbPath: t } : t);

/** Rows of one statement (`?` placeholders), read straight from the gateway's database. */
export const rows = <T = Record<string, unknown>>(t: SqlTarget | string, text: string, params: unknown[] = []) => sqlAll<T>(target(t), text, params);
export const row = <T = Record<string, unknown>>(t: SqlTarget | string, text: string, params: unknown[] = []) => sqlGet<T>(target(t), text, params) as Promise<T>;

export interface Books {
  balance: number;
  ledger: number;
  entries: number;
}

/**
 * Balance and ledger sum of every user (and of users with ledger rows but no balance), read in
 * one statement: one snapshot on PostgreSQL. Two reads could straddle the commit of a batch a
 * killed gateway had already sent, and see its ledger row without its balance update.
 */
export async function books(t: SqlTarget | string): Promise<Map<string, Books>> {
  const out = new Map<string, Books>();
  for (const r of await rows<{ city_id: string; user_id: string; balance: number; ledger: number; n: number; has: number }>(
    t,
    `SELECT city_id, user_id, SUM(balance) AS balance, SUM(ledger) AS ledger, SUM(n) AS n, SUM(has) AS has FROM (
       SELECT city_id, user_id, credits AS balance, 0 AS ledger, 0 AS n, 1 AS has FROM balances
       UNION ALL
       SELECT city_id, user_id, 0, credits, 1, 0 FROM ledger
     ) x GROUP BY city_id, user_id`,
  )) {
    out.set(`${r.city_id}/${r.user_id}`, { balance: Number(r.has) ? Number(r.balance) : NaN, ledger: Number(r.ledger), entries: Number(r.n) });
  }
  return out;
}

/**
 * Throws unless every balance equals the sum of its ledger, none is negative, and every ledger
 * row's balance_after is the running sum of that user's ledger up to it (in seq order): a row
 * written from a stale read of the balance would break the last one.
 */
export async function assertBooksBalance(t: SqlTarget | string): Promise<Map<string, Books>> {
  const all = await books(t);
  for (const [k, b] of all) {
    if (b.balance !== b.ledger) throw new Error(`${k}: balance ${b.balance} ≠ ledger sum ${b.ledger}`);
    if (b.balance < 0) throw new Error(`${k}: negative balance ${b.balance}`);
  }
  const running = new Map<string, number>();
  for (const r of await rows<{ city_id: string; user_id: string; seq: number; credits: number; balance_after: number }>(
    t,
    'SELECT city_id, user_id, seq, credits, balance_after FROM ledger ORDER BY seq',
  )) {
    const k = `${r.city_id}/${r.user_id}`;
    const sum = (running.get(k) ?? 0) + r.credits;
    running.set(k, sum);
    if (r.balance_after !== sum) throw new Error(`${k}: ledger row ${r.seq} says balance_after ${r.balance_after}, the running sum is ${sum}`);
  }
  return all;
}

export { sleep };

/** Polls until `f` returns a truthy value (or throws after `ms`). */
export const until = <T>(f: () => Promise<T> | T, ms = 5000, what = 'condition'): Promise<T> => waitUntil(what, f, ms);

/**
 * Calls of a user whose charge is not written yet: per-call holds still held, and credit leases
 * still open (a lease goes back once its charges are flushed and it has been idle for a second).
 * 0 means every charge of that user is in the ledger.
 */
export async function unsettled(t: SqlTarget | string, userId: string): Promise<number> {
  const h = await row<{ n: number }>(t, `SELECT COUNT(*) AS n FROM holds WHERE user_id = ? AND status = 'held'`, [userId]);
  const l = await row<{ n: number }>(t, `SELECT COUNT(*) AS n FROM leases WHERE user_id = ?`, [userId]);
  return Number(h.n) + Number(l.n);
}

/** What the ledger charged a user for AI calls: holds net of their closes, plus lease charges. */
export async function aiCharged(t: SqlTarget | string, userId: string): Promise<number> {
  const r = await row<{ c: number | null }>(
    t,
    `SELECT -SUM(credits) AS c FROM ledger WHERE user_id = ? AND kind IN ('hold', 'settle', 'release', 'expire', 'charge')`,
    [userId],
  );
  return Number(r.c ?? 0);
}
