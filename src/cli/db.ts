// citygate db copy --from sqlite:PATH --to postgres://…
// The one-time move of a Node deployment from its SQLite file to PostgreSQL: both databases are
// migrated to this version, then every table is copied in one PostgreSQL transaction (all of it
// or nothing), identity sequences are moved past the copied rows, and row counts are compared.
// The target must be empty (a new database); stop the gateway first so nothing is written meanwhile.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { sql, type Kysely } from 'kysely';
import type { Db } from '../db/database.ts';
import { openNodeSqlite } from '../db/dialects/node-sqlite.ts';
import { migrate } from '../db/migrate.ts';
import { ensurePartitionsSql } from '../services/usage/partitions.ts';
import { redactUrl } from '../runtimes/node/config.ts';
import { need, parse } from './args.ts';
import { CliError, out } from './output.ts';

const USAGE = 'citygate db copy --from sqlite:PATH --to postgres://USER@HOST:PORT/DB [--json]';

export async function dbCommand(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'copy') throw new CliError(`usage: ${USAGE}`);
  const { values } = parse(rest, { from: { type: 'string' }, to: { type: 'string' } }, USAGE);
  const from = need(values.from as string | undefined, '--from', USAGE);
  const to = need(values.to as string | undefined, '--to', USAGE);
  if (!from.startsWith('sqlite:')) throw new CliError(`--from must be sqlite:PATH (the gateway's DATABASE_PATH)\n\nusage: ${USAGE}`);
  if (!/^postgres(ql)?:\/\//.test(to)) throw new CliError(`--to must be a postgres:// URL\n\nusage: ${USAGE}`);
  const path = resolve(from.slice('sqlite:'.length));
  if (!existsSync(path)) throw new CliError(`no SQLite database at ${path}`);

  const o = out(!!values.json);
  const source = openNodeSqlite(path);
  const { openPostgres } = await import('../db/dialects/postgres.ts');
  const target = openPostgres(to, { poolSize: 2, statementTimeoutMs: 0 });
  try {
    await migrate(source);
    await migrate(target);
    const tables = (
      await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != '_migrations' ORDER BY name`.execute(
        source.kysely,
      )
    ).rows.map((r) => r.name);
    const counts: Record<string, number> = {};
    await target.kysely.transaction().execute(async (trx) => {
      for (const t of tables) {
        const n = await countRows(trx, t);
        if (n > 0) throw new CliError(`${redactUrl(to)} is not empty (table ${t} has ${n} rows); copy into a new database`);
      }
      // PostgreSQL keeps usage in day tables (migration 088): those of the copied records are
      // made first, else every record older than yesterday would land in the DEFAULT partition
      const days = await sql<{ d: number }>`SELECT DISTINCT created_at / 86400000 AS d FROM usage`.execute(source.kysely);
      for (const { d } of days.rows) await sql.raw(ensurePartitionsSql(Number(d), Number(d))).execute(trx);
      for (const t of tables) counts[t] = await copyTable(source, trx, t);
      for (const t of tables) {
        // identity columns (SQLite's INTEGER PRIMARY KEY) continue after the copied rows
        const ids = await sql<{ column_name: string }>`SELECT column_name FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = ${t} AND is_identity = 'YES'`.execute(trx);
        for (const { column_name: c } of ids.rows) {
          await sql`SELECT setval(pg_get_serial_sequence(${t}, ${c}), COALESCE((SELECT MAX(${sql.ref(c)}) FROM ${sql.table(t)}), 0) + 1, false)`.execute(trx);
        }
      }
      for (const t of tables) {
        const n = await countRows(trx, t);
        if (n !== counts[t]) throw new Error(`table ${t}: copied ${counts[t]} rows but the target has ${n}`);
      }
    });
    if (o.json) o.line(JSON.stringify({ from: path, to: redactUrl(to), tables: counts }));
    else {
      for (const t of tables) o.line(`${t.padEnd(20)} ${counts[t]} rows`);
      o.line(`\ncopied ${path} to ${redactUrl(to)}. Start the gateway with DATABASE_URL=${redactUrl(to)}`);
    }
    return 0;
  } finally {
    await source.close();
    await target.close();
  }
}

async function countRows(k: Kysely<any>, table: string): Promise<number> {
  const r = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql.table(table)}`.execute(k);
  return Number(r.rows[0].n);
}

/** Copies one table in pages of rows, each page one multi-row INSERT within PostgreSQL's parameter limit. */
async function copyTable(source: Db, trx: Kysely<any>, table: string): Promise<number> {
  const src = source.kysely as unknown as Kysely<any>;
  const cols = (await sql<{ name: string }>`SELECT name FROM pragma_table_info(${table})`.execute(src)).rows.map((r) => r.name);
  const page = Math.max(1, Math.floor(60_000 / Math.max(1, cols.length)));
  let copied = 0;
  for (let offset = 0; ; offset += page) {
    const rows = await src.selectFrom(table).select(cols).orderBy(sql`rowid`).limit(page).offset(offset).execute();
    if (rows.length === 0) break;
    await trx.insertInto(table).values(rows).execute();
    copied += rows.length;
    if (rows.length < page) break;
  }
  return copied;
}
