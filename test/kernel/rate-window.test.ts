// The rate-limit counter at a window boundary, on a real database (SQLite, and PostgreSQL when
// reachable): a count that reaches the row late, after the next window has started counting, is
// added to the newer window — it never resets the row back to its own, older window (which would
// drop the newer window's count and let up to a whole limit more calls through in that window).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { migrate } from '../../src/db/migrate.ts';
import { CounterBatch } from '../../src/kernel/counter-batch.ts';
import { openNodeDatabase } from '../../src/runtimes/node/database.ts';
import { tempDir } from '../helpers/gateway.ts';
import { createTestDatabase, pgSkipReason } from '../helpers/postgres.ts';

const W0 = 1_795_000_000_000 - (1_795_000_000_000 % 60_000); // one window, and the next
const W1 = W0 + 60_000;

async function lateCountKeepsTheNewerWindow(databaseUrl: string | null) {
  const db = await openNodeDatabase({ databaseUrl, databasePath: join(tempDir('citygate-rate-window-'), 'c.sqlite'), poolSize: 2, statementTimeoutMs: 0 });
  try {
    await migrate(db);
    const batch = new CounterBatch(db);
    const counted: number[] = [];
    for (let i = 0; i < 3; i++) counted.push(await batch.add('u:k', 1, W1)); // the new window: 3 calls
    counted.push(await batch.add('u:k', 1, W0)); // a call of the old window, written late
    counted.push(await batch.add('u:k', 1, W1)); // the new window goes on counting
    assert.deepEqual(counted, [1, 2, 3, 4, 5], 'the late call counts in the newer window; nothing is reset');
    const row = await db.kysely.selectFrom('rate_counters').selectAll().where('key', '=', 'u:k').executeTakeFirstOrThrow();
    assert.deepEqual({ window_start: Number(row.window_start), n: Number(row.n) }, { window_start: W1, n: 5 });
    // A later window starts afresh, as before.
    assert.equal(await batch.add('u:k', 1, W1 + 60_000), 1);
  } finally {
    await db.close();
  }
}

test('SQLite: a count written late for the previous window adds to the current one, never resets it', () => lateCountKeepsTheNewerWindow(null));

test('PostgreSQL: the same', { skip: await pgSkipReason() }, async () => lateCountKeepsTheNewerWindow((await createTestDatabase()).url));
