// Batches the counter updates of one process: every increment asked for in the same turn of
// the event loop goes out as ONE multi-row UPSERT … RETURNING (per window), and each caller
// learns the count as of its own increment (the batch's total minus what came after it in the
// batch). Exact across processes — the database adds atomically — while the hot path pays
// one statement per loop turn instead of one per request. Statement texts are built once per
// row count (compiling a Kysely query costs more than running it on SQLite).
import { CompiledQuery, sql } from 'kysely';
import { rowsPerStatement, textsByRowCount, type Db } from '../db/database.ts';

interface Entry {
  add: number;
  waiters: { add: number; resolve: (n: number) => void; reject: (e: unknown) => void }[];
}

const defer: (f: () => void) => void =
  typeof setImmediate === 'function' ? (f) => void setImmediate(f) : (f) => void setTimeout(f, 0);

export class CounterBatch {
  readonly db: Db;
  /** window start → key → entry */
  #pending = new Map<number, Map<string, Entry>>();
  #scheduled = false;
  /** Rows per statement (D1: 100 parameters). */
  readonly #chunk: number;

  constructor(db: Db) {
    this.db = db;
    this.#chunk = rowsPerStatement(db.dialect, 3, 100);
  }

  /** Adds `add` to the key's counter of the window; resolves with the count including this add. */
  add(key: string, add: number, windowStart: number): Promise<number> {
    return new Promise((resolve, reject) => {
      let byKey = this.#pending.get(windowStart);
      if (!byKey) this.#pending.set(windowStart, (byKey = new Map()));
      let e = byKey.get(key);
      if (!e) byKey.set(key, (e = { add: 0, waiters: [] }));
      e.add += add;
      e.waiters.push({ add, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        defer(() => void this.#flush());
      }
    });
  }

  async #flush(): Promise<void> {
    const batches = this.#pending;
    this.#pending = new Map();
    this.#scheduled = false;
    for (const [windowStart, byKey] of batches) {
      // Counters only read (an add of 0: token counts at admission) need no write transaction.
      const reads: [string, Entry][] = [];
      const entries: [string, Entry][] = [];
      for (const kv of byKey) (kv[1].add === 0 ? reads : entries).push(kv);
      if (reads.length > 0) await this.#read(windowStart, reads);
      if (entries.length === 0) continue;
      try {
        const after = new Map<string, number>();
        for (let at = 0; at < entries.length; at += this.#chunk) {
          const part = entries.slice(at, at + this.#chunk);
          const params: unknown[] = [];
          for (const [key, e] of part) params.push(key, windowStart, e.add);
          const { rows } = await this.db.kysely.executeQuery<{ key: string; n: number }>(CompiledQuery.raw(this.#upsertText(part.length), params));
          for (const r of rows) after.set(r.key, Number(r.n));
        }
        for (const [key, e] of entries) {
          // Hand out the counts in arrival order: the first waiter saw the count before the rest of the batch.
          let running = (after.get(key) ?? e.add) - e.add;
          for (const w of e.waiters) w.resolve((running += w.add));
        }
      } catch (err) {
        for (const [, e] of entries) for (const w of e.waiters) w.reject(err);
      }
    }
  }

  /** Counts of keys only read: what the row holds for this window (or a later one), else 0. */
  async #read(windowStart: number, entries: [string, Entry][]): Promise<void> {
    try {
      const found = new Map<string, number>();
      for (let at = 0; at < entries.length; at += this.#chunk * 3) {
        const keys = entries.slice(at, at + this.#chunk * 3).map(([key]) => key);
        const { rows } = await this.db.kysely.executeQuery<{ key: string; n: number; window_start: number }>(CompiledQuery.raw(this.#selectText(keys.length), keys));
        for (const r of rows) found.set(r.key, Number(r.window_start) >= windowStart ? Number(r.n) : 0);
      }
      for (const [key, e] of entries) for (const w of e.waiters) w.resolve(found.get(key) ?? 0);
    } catch (err) {
      for (const [, e] of entries) for (const w of e.waiters) w.reject(err);
    }
  }

  /** The UPSERT … RETURNING of n rows; its parameters are key, window start, add, row by row. */
  #upsertText = textsByRowCount('rate counters', 3, (n) =>
    this.db.kysely
      .insertInto('rate_counters')
      .values(Array.from({ length: n }, () => ({ key: '', window_start: 0, n: 0 })))
      // A newer window starts the count afresh. A batch of an older window that reaches the
      // row after a newer one has started (its window ended while it waited for the event loop
      // or the database) is counted in the newer window: never a reset back to the old window,
      // which would drop the newer window's count and let up to a whole limit more through.
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({
          n: sql<number>`CASE WHEN rate_counters.window_start >= excluded.window_start THEN rate_counters.n + excluded.n ELSE excluded.n END`,
          window_start: sql<number>`CASE WHEN rate_counters.window_start > excluded.window_start THEN rate_counters.window_start ELSE excluded.window_start END`,
        }),
      )
      .returning(['key', 'n'])
      .compile(),
  );

  /** The SELECT of n keys' counts. */
  #selectText = textsByRowCount('rate counters', 1, (n) =>
    this.db.kysely
      .selectFrom('rate_counters')
      .select(['key', 'n', 'window_start'])
      .where('key', 'in', Array.from({ length: n }, () => ''))
      .compile(),
  );
}
