// Replicas on PostgreSQL, as README's "Scaling out" says: one new database, one shared
// CITYGATE_MASTER_KEY; all three serve, and a secret sealed through one opens on the others.
// A replica started without the key refuses to start and says how to make one, and that every
// replica needs the same (no key file is generated that a redeploy could lose).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { startGateway, startGateways, TEST_MASTER_KEY, type TestGateway } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { createTestDatabase, pgSkipReason } from '../helpers/postgres.ts';

const skip = await pgSkipReason();

test('three replicas on one new PostgreSQL database with one shared master key all serve; one without the key refuses', { skip }, async () => {
  const db = await createTestDatabase();
  let gws: TestGateway[] = [];
  try {
    gws = await startGateways(3, { env: { DATABASE_URL: db.url, CITYGATE_MASTER_KEY: TEST_MASTER_KEY } });
    const admin = client(gws[0].url, gws[0].adminKey);
    assert.equal((await admin.post('/v1/env/upsert', { key: 'SHARED_SECRET_KEY', value: 'sealed-once' })).status, 200);
    for (const g of gws) {
      const a = client(g.url, g.adminKey);
      assert.equal((await a.get('/health/ready')).status, 200);
      const listed = (await a.get('/v1/env/list?reveal=true')).body.items?.find((e: { key: string }) => e.key === 'SHARED_SECRET_KEY');
      assert.ok(listed, 'every replica reads the secret');
      assert.equal(existsSync(`${g.dbPath}.master-key`), false, 'no key file next to DATABASE_PATH');
    }

    for (const workers of ['1', '2']) {
      await assert.rejects(startGateway({ env: { DATABASE_URL: db.url, CITYGATE_MASTER_KEY: undefined, GATEWAY_WORKERS: workers } }), (e: Error) => {
        assert.match(e.message, /exited with 1 before listening/);
        assert.match(e.message, /DATABASE_URL is set but CITYGATE_MASTER_KEY is not/);
        assert.match(e.message, /openssl rand -hex 32/);
        assert.match(e.message, /same CITYGATE_MASTER_KEY on every replica/);
        return true;
      });
    }
  } finally {
    for (const g of gws) await g.stop();
    await db.drop();
  }
});
