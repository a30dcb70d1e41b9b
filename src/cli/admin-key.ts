// The admin key. Two forms:
//   citygate admin-key [--show] [--gateway G]  the key registered for the current (or given)
//                                             gateway, masked unless --show
//   DATABASE_PATH=… citygate admin-key         read straight from a local database file, as an
//                                             operator would with SQL (the Node deployment)
//   DATABASE_URL=postgres://… citygate admin-key   the same from a PostgreSQL database
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { readNodeConfig, redactUrl } from '../runtimes/node/config.ts';
import { parse } from './args.ts';
import { resolveTarget } from './client.ts';
import { loadConfig, maskKey } from './config.ts';
import { CliError, out } from './output.ts';

const USAGE = 'citygate admin-key [--show] [--gateway NAME|URL] [--json]   (or DATABASE_PATH=…|DATABASE_URL=… citygate admin-key)';

export async function adminKeyCommand(args: string[] = []): Promise<number> {
  const { values } = parse(args, { show: { type: 'boolean' } }, USAGE);
  const o = out(!!values.json);
  const useGateway = values.gateway !== undefined || (!process.env.DATABASE_PATH && !process.env.DATABASE_URL && loadConfig().current !== null);
  if (useGateway) {
    const t = resolveTarget(values.gateway as string | undefined, { ...process.env, CITYGATE_ADMIN_KEY: undefined });
    if (!t.adminKey) throw new CliError(`no admin key is registered for ${t.url}; redeploy with \`citygate deploy\` or run \`citygate gateways add ${t.url} --admin-key KEY\``);
    const shown = values.show ? t.adminKey : maskKey(t.adminKey);
    if (o.json) o.line(JSON.stringify({ gateway: t.name, url: t.url, admin_key: shown, masked: !values.show }));
    else o.line(values.show ? shown : `${shown}   (${t.name ?? t.url}; --show prints it in full)`);
    return 0;
  }
  const config = readNodeConfig();
  if (config.databaseUrl) {
    const { openPostgres } = await import('../db/dialects/postgres.ts');
    const db = openPostgres(config.databaseUrl, { poolSize: 1 });
    try {
      const row = await db.kysely.selectFrom('env').select('value').where('key', '=', 'GATEWAY_ADMIN_SECRET_KEY').executeTakeFirst().catch(() => undefined);
      if (!row) throw new CliError(`${redactUrl(config.databaseUrl)} has no admin key yet; start the gateway once`);
      if (o.json) o.line(JSON.stringify({ database: redactUrl(config.databaseUrl), admin_key: row.value }));
      else o.line(row.value);
      return 0;
    } finally {
      await db.close();
    }
  }
  const { databasePath } = config;
  if (!existsSync(databasePath)) {
    throw new CliError(`no database at ${databasePath}; start the gateway once (npm start), set DATABASE_PATH, or register a gateway (citygate deploy)`);
  }
  const db = new DatabaseSync(databasePath, { readOnly: true });
  try {
    const row = db.prepare(`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`).get() as { value: string } | undefined;
    if (!row) throw new CliError(`${databasePath} has no admin key yet; start the gateway once`);
    if (o.json) o.line(JSON.stringify({ database: databasePath, admin_key: row.value }));
    else o.line(row.value);
    return 0;
  } finally {
    db.close();
  }
}
