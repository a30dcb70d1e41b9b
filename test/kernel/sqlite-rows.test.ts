// The embedded SQLite driver's rows: node:sqlite gives arrays, the driver makes them ordinary
// objects (its own row objects are dictionary-mode, ~2.6 KB per usage record). What a caller
// reads must be what node:sqlite's objects held, also after another process changes the schema.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { sql } from 'kysely';
import { openNodeSqlite } from '../../src/db/dialects/node-sqlite.ts';
import { tempDir } from '../helpers/gateway.ts';

test('rows hold what node:sqlite reads: every column, its type, NULL, a BLOB, a repeated name (the last wins)', async () => {
  const path = join(tempDir(), 'rows.sqlite');
  const db = openNodeSqlite(path);
  try {
    await sql`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, price REAL, note TEXT, data BLOB)`.execute(db.kysely);
    await sql`INSERT INTO t VALUES (1, 'a', 1.5, NULL, x'0102'), (2, 'b "q"', -3, 'n', NULL)`.execute(db.kysely);
    const query = `SELECT id, name, price, note, data, name AS n2, id AS name FROM t ORDER BY id`;
    const ours = (await sql.raw(query).execute(db.kysely)).rows;
    const plain = new DatabaseSync(path, { readOnly: true });
    const theirs = plain.prepare(query).all();
    plain.close();
    assert.deepEqual(ours.map((r) => ({ ...(r as object) })), theirs.map((r) => ({ ...r })));
    assert.deepEqual(ours[0], { id: 1, name: 1, price: 1.5, note: null, data: new Uint8Array([1, 2]), n2: 'a' });
    // through the query builder and in a batch, the same
    assert.deepEqual(await db.kysely.selectFrom('t' as never).select(['id', 'name'] as never).orderBy('id' as never).execute(), [{ id: 1, name: 'a' }, { id: 2, name: 'b "q"' }]);
    const [batched] = await db.batch([sql`SELECT count(*) AS n FROM t`.compile(db.kysely)]);
    assert.deepEqual(batched.rows, [{ n: 2 }]);
  } finally {
    await db.close();
  }
});

test('a cached `SELECT *` reads the new column after another process adds it', async () => {
  const path = join(tempDir(), 'schema.sqlite');
  const db = openNodeSqlite(path);
  try {
    await sql`CREATE TABLE t (a INTEGER, b TEXT)`.execute(db.kysely);
    await sql`INSERT INTO t VALUES (1, 'x')`.execute(db.kysely);
    const all = () => db.kysely.selectFrom('t' as never).selectAll().execute();
    assert.deepEqual(await all(), [{ a: 1, b: 'x' }]);
    const other = new DatabaseSync(path);
    other.exec(`ALTER TABLE t ADD COLUMN c TEXT DEFAULT 'new'`);
    other.close();
    assert.deepEqual(await all(), [{ a: 1, b: 'x', c: 'new' }]);
  } finally {
    await db.close();
  }
});

test('a column named __proto__ is a field of the row, not its prototype', async () => {
  const db = openNodeSqlite(join(tempDir(), 'proto.sqlite'));
  try {
    const [row] = (await sql.raw(`SELECT 1 AS a, '{"polluted":true}' AS "__proto__"`).execute(db.kysely)).rows as Record<string, unknown>[];
    assert.equal(Object.getOwnPropertyDescriptor(row, '__proto__')?.value, '{"polluted":true}');
    assert.equal(Object.getPrototypeOf(row), Object.prototype);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  } finally {
    await db.close();
  }
});
