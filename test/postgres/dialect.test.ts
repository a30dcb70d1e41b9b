// The PostgreSQL dialect itself, on a real server: what services rely on without knowing it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import type { Db } from '../../src/db/database.ts';
import { isUniqueViolation } from '../../src/db/database.ts';
import { migrate } from '../../src/db/migrate.ts';
import { createTestDatabase, pgSkipReason } from '../helpers/postgres.ts';

const skip = await pgSkipReason();
let db: Db;
before(async () => {
  if (skip) return;
  const { openPostgres } = await import('../../src/db/dialects/postgres.ts');
  db = openPostgres((await createTestDatabase()).url);
  await migrate(db);
});
after(() => db?.close());

const TRICKY = ["O'Brien", 'back\\slash \\\\ and \\n', 'dollar $1 $2 and $$ quoted $$', '-- not a comment', '/* nor this */', 'line\nbreak', 'ünïcödé 🙂', ''];

test('a batch writes strings and numbers exactly as given, in one transaction, with change counts', { skip }, async () => {
  const at = 1_700_000_000_123; // epoch ms: beyond 32 bits
  const rs = await db.batch([
    ...TRICKY.map((v, i) => db.kysely.insertInto('env').values({ key: `k${i}`, value: v, updated_at: at - i })),
    db.kysely.updateTable('env').set({ updated_at: -5 }).where('key', 'in', ['k0', 'k1']),
    sql`SELECT ${-7} - ${-3} AS d, -${-3} AS n, ${2.5} * 2 AS f, ${at} AS t`.compile(db.kysely),
  ]);
  assert.deepEqual(rs.slice(0, TRICKY.length).map((r) => r.changes), TRICKY.map(() => 1));
  assert.equal(rs[TRICKY.length].changes, 2);
  assert.deepEqual(rs[TRICKY.length + 1].rows, [{ d: -4, n: 3, f: 5, t: at }]);
  const rows = await db.kysely.selectFrom('env').select(['key', 'value', 'updated_at']).where('key', 'like', 'k%').orderBy('key').execute();
  assert.deepEqual(rows.map((r) => r.value), TRICKY);
  assert.deepEqual(rows.map((r) => r.updated_at), [-5, -5, ...TRICKY.slice(2).map((_, i) => at - i - 2)]);
  assert.equal(typeof rows[3].updated_at, 'number', 'BIGINT comes back as a JS number');
});

test('a failing statement rolls the whole batch back; unique violations are recognised', { skip }, async () => {
  await assert.rejects(
    db.batch([db.kysely.insertInto('env').values({ key: 'new-one', value: 'x', updated_at: 1 }), db.kysely.insertInto('env').values({ key: 'k0', value: 'dup', updated_at: 1 })]),
    (e) => isUniqueViolation(e),
  );
  assert.equal(await db.kysely.selectFrom('env').select('key').where('key', '=', 'new-one').executeTakeFirst(), undefined);
  // and the pooled connection is usable afterwards
  assert.equal((await db.batch([sql`SELECT 1 AS one`.compile(db.kysely)]))[0].rows[0].one, 1);
});

test('the ledger is append-only and balances never negative, as on SQLite', { skip }, async () => {
  await db.batch([
    sql`INSERT INTO balances (city_id, user_id, credits, opened_entry, created_at, updated_at) VALUES ('c', 'u', 5, 'e', 1, 1)`.compile(db.kysely),
    sql`INSERT INTO ledger (entry_id, idempotency_key, city_id, user_id, credits, balance_after, kind, created_at) VALUES ('e', 'k', 'c', 'u', 5, 5, 'grant', 1)`.compile(db.kysely),
  ]);
  await assert.rejects(db.batch([sql`UPDATE ledger SET credits = 6`.compile(db.kysely)]), /append-only/);
  await assert.rejects(db.batch([sql`DELETE FROM ledger`.compile(db.kysely)]), /append-only/);
  await assert.rejects(db.batch([sql`UPDATE balances SET credits = -1`.compile(db.kysely)]), /check constraint/);
});
