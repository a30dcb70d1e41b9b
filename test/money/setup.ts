// Shared helpers of the money tests: tokens, and the invariants read straight from the
// database file the way an auditor would.
import { DatabaseSync } from 'node:sqlite';
import { client } from '../helpers/http.ts';
import { sleep, until as waitUntil } from '../helpers/wait.ts';

export type Client = ReturnType<typeof client>;

export async function cityWithUser(admin: Client, cityId: string, userId: string): Promise<string> {
  const c = await admin.post('/v1/cities/create', { name: cityId, city_id: cityId });
  if (c.status !== 200 && c.status !== 409) throw new Error(`city create: ${c.status} ${c.text}`);
  const t = await admin.post('/v1/cities/tokens/apply', { city_id: cityId, user_id: userId });
  if (t.status !== 200) throw new Error(`token apply: ${t.status} ${t.text}`);
  return t.body.user_token;
}

export function readDb<T>(dbPath: string, f: (db: DatabaseSync) => T): T {
  const db = new DatabaseSync(dbPath, { readOnly: true });
  try {
    return f(db);
  } finally {
    db.close();
  }
}

export interface Books {
  balance: number;
  ledger: number;
  entries: number;
}

/** Balance and ledger sum of every user (and of users with ledger rows but no balance). */
export function books(dbPath: string): Map<string, Books> {
  return readDb(dbPath, (db) => {
    const out = new Map<string, Books>();
    for (const r of db.prepare('SELECT city_id, user_id, credits FROM balances').all() as { city_id: string; user_id: string; credits: number }[]) {
      out.set(`${r.city_id}/${r.user_id}`, { balance: r.credits, ledger: 0, entries: 0 });
    }
    for (const r of db.prepare('SELECT city_id, user_id, SUM(credits) AS s, COUNT(*) AS n FROM ledger GROUP BY city_id, user_id').all() as {
      city_id: string;
      user_id: string;
      s: number;
      n: number;
    }[]) {
      const k = `${r.city_id}/${r.user_id}`;
      const b = out.get(k) ?? { balance: NaN, ledger: 0, entries: 0 };
      b.ledger = r.s;
      b.entries = r.n;
      out.set(k, b);
    }
    return out;
  });
}

/** Throws unless every balance equals the sum of its ledger and none is negative. */
export function assertBooksBalance(dbPath: string): Map<string, Books> {
  const all = books(dbPath);
  for (const [k, b] of all) {
    if (b.balance !== b.ledger) throw new Error(`${k}: balance ${b.balance} ≠ ledger sum ${b.ledger}`);
    if (b.balance < 0) throw new Error(`${k}: negative balance ${b.balance}`);
  }
  return all;
}

export { sleep };

/** Polls until `f` returns a truthy value (or throws after `ms`). */
export const until = <T>(f: () => Promise<T> | T, ms = 5000, what = 'condition'): Promise<T> => waitUntil(what, f, ms);
