// Models as data (issue 26): the ai_models table (ai/models/*), and per usage record the cost
// at the base price beside the credits charged (a city's margin) and the alias the caller asked
// for. Portable types only (see 040). Older records have no base_credits (NULL: the view reads
// it as the credits charged, i.e. no margin); the daily rollup's older rows are set so.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Statement } from '../database.ts';

export default (db: Kysely<any>): Statement[] => [
  db.schema
    .createTable('ai_models')
    .ifNotExists()
    .addColumn('model_id', 'text', (c) => c.primaryKey().notNull())
    // NULL fields: the built-in model of the same id decides (or the default)
    .addColumn('name', 'text')
    .addColumn('description', 'text')
    .addColumn('modes', 'text') // JSON array of modes
    .addColumn('provider', 'text') // an env slot id that serves it, if any
    .addColumn('upstream_model', 'text')
    .addColumn('prices', 'text') // JSON price object (credits); NULL: the catalog's
    .addColumn('max_output_tokens', 'integer')
    .addColumn('context_window', 'integer')
    .addColumn('aliases', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull()),
  db.schema.alterTable('usage').addColumn('base_credits', 'bigint'),
  db.schema.alterTable('usage').addColumn('alias', 'text'),
  db.schema.alterTable('usage_daily').addColumn('base_credits', 'bigint', (c) => c.notNull().defaultTo(0)),
  sql`UPDATE usage_daily SET base_credits = credits`.compile(db),
];
