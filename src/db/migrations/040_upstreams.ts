// Upstreams as data (ai/upstreams/*) and which upstream served each usage record. Written with
// Kysely's schema builder and portable types only (text, integer, bigint), so the same
// migration compiles for SQLite, D1 and PostgreSQL. Times are epoch ms: bigint (PostgreSQL's
// integer is 32-bit). SQLite adds one column per ALTER TABLE, hence one statement each.
import type { Kysely } from 'kysely';
import type { Statement } from '../database.ts';

export default (db: Kysely<any>): Statement[] => [
  db.schema
    .createTable('ai_upstreams')
    .ifNotExists()
    .addColumn('upstream_id', 'text', (c) => c.primaryKey().notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('base_url', 'text', (c) => c.notNull())
    .addColumn('api_key', 'text')
    .addColumn('models', 'text', (c) => c.notNull()) // JSON: ["id" | {id, upstream_model}]
    .addColumn('weight', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('priority', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1)) // 0 | 1: portable boolean
    .addColumn('timeout_ms', 'integer')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull()),
  db.schema.alterTable('usage').addColumn('upstream', 'text'),
  db.schema.alterTable('usage').addColumn('attempts', 'integer'),
];
