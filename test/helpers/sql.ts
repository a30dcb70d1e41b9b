// Reading a gateway's database the way an operator or auditor would: plain SQL, on the SQLite
// file or on PostgreSQL. Statements use `?` placeholders on both.
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';

/** Where a gateway keeps its data: the SQLite file, or a PostgreSQL URL when set. */
export interface SqlTarget {
  dbPath: string;
  databaseUrl?: string | null;
}

const numbers = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 || oid === 1700) return (v: string) => Number(v); // BIGINT, NUMERIC (SUM) as numbers
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

export async function sqlAll<T = Record<string, unknown>>(t: SqlTarget, text: string, params: unknown[] = []): Promise<T[]> {
  if (!t.databaseUrl) {
    // As an operator's sqlite3 with .timeout: wait for the gateway's write under way (a usage
    // flush) instead of failing at once with "database is locked" (seen on a loaded machine).
    const db = new DatabaseSync(t.dbPath, { readOnly: !/^\s*(insert|update|delete)/i.test(text), timeout: 10_000 });
    try {
      return db.prepare(text).all(...(params as never[])) as T[];
    } finally {
      db.close();
    }
  }
  const c = new pg.Client({ connectionString: t.databaseUrl, types: numbers } as pg.ClientConfig);
  await c.connect();
  try {
    let i = 0;
    return (await c.query(text.replace(/\?/g, () => `$${++i}`), params)).rows as T[];
  } finally {
    await c.end();
  }
}

export async function sqlGet<T = Record<string, unknown>>(t: SqlTarget, text: string, params: unknown[] = []): Promise<T | undefined> {
  return (await sqlAll<T>(t, text, params))[0];
}
