// An in-process gateway on a real database, for the billing tests that call the billing
// capability directly: SQLite in a temp dir, or a fresh PostgreSQL database when the suite runs
// on PostgreSQL. Users are funded through the public API (balance/adjust), in city 'c'.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { openNodeSqlite } from '../../src/db/dialects/node-sqlite.ts';
import type { Db } from '../../src/db/database.ts';
import { createGateway, type Gateway } from '../../src/kernel/gateway.ts';
import { silentLogger } from '../../src/kernel/log.ts';
import { stockServices } from '../../src/services/index.ts';
import { tempDir } from '../helpers/gateway.ts';
import { createTestDatabase, ON_POSTGRES } from '../helpers/postgres.ts';
import type { SqlTarget } from '../helpers/sql.ts';

export interface InProcess {
  db: Db;
  gw: Gateway;
  dbTarget: SqlTarget;
  /** Credits and leased credits of a user of city 'c'. */
  balanceRow(user: string): Promise<{ credits: number; leased: number }>;
  balance(user: string): Promise<number>;
  fund(user: string, credits: number): Promise<void>;
  close(): Promise<void>;
}

export async function inProcessGateway(name: string, env: Record<string, string>): Promise<InProcess> {
  let db: Db;
  let dbTarget: SqlTarget;
  if (ON_POSTGRES) {
    const { url } = await createTestDatabase();
    const { openPostgres } = await import('../../src/db/dialects/postgres.ts');
    dbTarget = { dbPath: '', databaseUrl: url };
    db = openPostgres(url);
  } else {
    dbTarget = { dbPath: join(tempDir(), `${name}.sqlite`) };
    db = openNodeSqlite(dbTarget.dbPath);
  }
  const gw = createGateway({ db, services: stockServices, logger: silentLogger, processEnv: env });
  await gw.init();
  const balanceRow = async (user: string) => {
    const r = await db.kysely.selectFrom('balances').select(['credits', 'leased']).where('city_id', '=', 'c').where('user_id', '=', user).executeTakeFirst();
    return { credits: Number(r?.credits ?? 0), leased: Number(r?.leased ?? 0) };
  };
  return {
    db,
    gw,
    dbTarget,
    balanceRow,
    balance: async (user) => (await balanceRow(user)).credits,
    async fund(user, credits) {
      const r = await gw.fetch(
        new Request('http://x/v1/balance/adjust', {
          method: 'POST',
          headers: { authorization: `Bearer ${gw.context.env.get('GATEWAY_ADMIN_SECRET_KEY')}`, 'content-type': 'application/json' },
          body: JSON.stringify({ city_id: 'c', user_id: user, credits, reason: 'fund', idempotency_key: `fund-${user}-${credits}` }),
        }),
      );
      assert.equal(r.status, 200, await r.text());
    },
    async close() {
      await gw.stop();
      await db.close();
    },
  };
}
