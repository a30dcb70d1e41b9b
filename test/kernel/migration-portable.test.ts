// Migration 040 (upstreams, usage.upstream/attempts) is written with Kysely's schema builder so
// it is portable: compiled for SQLite it runs on node:sqlite (and D1, see test/edge), compiled
// for PostgreSQL it runs on a real PostgreSQL (CITYGATE_TEST_DATABASE_URL, through psql; skips
// without it). Earlier migrations are SQLite text and are the PostgreSQL dialect's business.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler } from 'kysely';
import { compile } from '../../src/db/database.ts';
import upstreams from '../../src/db/migrations/040_upstreams.ts';

function compiler(kind: 'postgres' | 'sqlite'): Kysely<any> {
  return new Kysely<any>({
    dialect: {
      createAdapter: () => (kind === 'postgres' ? new PostgresAdapter() : new SqliteAdapter()),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => (kind === 'postgres' ? new PostgresIntrospector(db) : new SqliteIntrospector(db)),
      createQueryCompiler: () => (kind === 'postgres' ? new PostgresQueryCompiler() : new SqliteQueryCompiler()),
    },
  });
}

const sqlOf = (kind: 'postgres' | 'sqlite') => upstreams(compiler(kind)).map((s) => compile(s).sql);

test('migration 040 compiles to portable types and runs on SQLite', () => {
  const stmts = sqlOf('sqlite');
  assert.match(stmts[0], /"created_at" bigint not null/);
  const db = new DatabaseSync(':memory:');
  db.exec('CREATE TABLE usage (usage_id TEXT PRIMARY KEY)');
  for (const s of stmts) db.exec(s);
  const cols = (db.prepare(`SELECT name FROM pragma_table_info('usage')`).all() as { name: string }[]).map((c) => c.name);
  assert.deepEqual(cols, ['usage_id', 'upstream', 'attempts']);
  db.close();
});

test('migration 040 runs on PostgreSQL', (t) => {
  const url = process.env.CITYGATE_TEST_DATABASE_URL;
  if (!url) return t.skip('CITYGATE_TEST_DATABASE_URL is not set: no PostgreSQL check');
  const psql = (db: string, sql: string) => execFileSync('psql', [db, '-v', 'ON_ERROR_STOP=1', '-Atqc', sql], { encoding: 'utf8' });
  const name = `citygate_m040_${process.pid}`;
  const target = new URL(url);
  target.pathname = `/${name}`;
  psql(url, `CREATE DATABASE ${name}`);
  try {
    psql(target.href, 'CREATE TABLE usage (usage_id TEXT PRIMARY KEY)');
    for (const s of sqlOf('postgres')) psql(target.href, s);
    const types = psql(target.href, `SELECT column_name || ':' || data_type FROM information_schema.columns WHERE table_name = 'ai_upstreams' ORDER BY ordinal_position`).trim().split('\n');
    assert.ok(types.includes('created_at:bigint') && types.includes('weight:integer') && types.includes('api_key:text'), types.join(' '));
    const usage = psql(target.href, `SELECT string_agg(column_name, ',' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = 'usage'`).trim();
    assert.equal(usage, 'usage_id,upstream,attempts');
  } finally {
    psql(url, `DROP DATABASE IF EXISTS ${name}`);
  }
});
