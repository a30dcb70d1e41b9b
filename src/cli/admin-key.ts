// Reads the admin key straight from the database file, as an operator would with SQL.
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { readNodeConfig } from '../runtimes/node/config.ts';

export async function adminKeyCommand(): Promise<number> {
  const { databasePath } = readNodeConfig();
  if (!existsSync(databasePath)) {
    process.stderr.write(`citygate admin-key: no database at ${databasePath}; start the gateway once (npm start) or set DATABASE_PATH.\n`);
    return 1;
  }
  const db = new DatabaseSync(databasePath, { readOnly: true });
  try {
    const row = db.prepare(`SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`).get() as { value: string } | undefined;
    if (!row) {
      process.stderr.write(`citygate admin-key: ${databasePath} has no admin key yet; start the gateway once.\n`);
      return 1;
    }
    process.stdout.write(`${row.value}\n`);
    return 0;
  } finally {
    db.close();
  }
}
