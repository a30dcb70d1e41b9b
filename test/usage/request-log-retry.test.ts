// Request-log rows are written in batches off the request path. A batch whose COMMIT is lost with
// its connection (a database restart) is retried as the very same rows: one that had committed is
// not written twice, and the logs that came after it are written, not blocked behind it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Db } from '../../src/db/database.ts';
import type { CapturedCall } from '../../src/kernel/request-log.ts';
import { RequestLogs } from '../../src/services/usage/request-log/keeper.ts';
import { inProcessGateway, type InProcess } from '../money/in-process.ts';
import { rows } from '../money/setup.ts';
import { until } from '../helpers/wait.ts';

let world: InProcess;
before(async () => {
  world = await inProcessGateway('request-log-retry', {});
});
after(() => world.close());

const call = (requestId: string): CapturedCall => ({
  mode: 'metadata',
  requestId,
  identity: { kind: 'user', cityId: 'c', userId: 'u', expiresAt: 0 },
  credential: null,
  route: '/v1/ai/chat/completions',
  method: 'POST',
  url: 'http://127.0.0.1/v1/ai/chat/completions',
  receivedAt: Date.now(),
  request: { headers: [['content-type', 'application/json']], bytes: 10, body: null },
  response: { status: 200, headers: [], bytes: 20, stream: false, headMs: 1, endMs: 2, ended: 'ok' },
});

test('a batch committed but reported lost is not written twice, and the logs after it are written', async () => {
  let loseNext = false;
  let attempts = 0;
  const db = world.db;
  const lossy: Db = Object.create(db, {
    batch: {
      value: async (qs: Parameters<Db['batch']>[0]) => {
        attempts++;
        const r = await db.batch(qs);
        if (loseNext) {
          loseNext = false;
          throw new Error('Connection terminated unexpectedly');
        }
        return r;
      },
    },
  });
  const keeper = new RequestLogs(Object.create(world.gw.context, { db: { value: lossy } }));
  loseNext = true;
  keeper.write(call('req_first'));
  await until('the first batch tried', () => attempts >= 1 && !loseNext);
  keeper.write(call('req_second'));
  await until('both logs written', async () => (await rows(world.dbTarget, `SELECT 1 FROM request_logs WHERE request_id = 'req_second'`)).length === 1, 10_000);
  await keeper.stop();
  const got = await rows<{ request_id: string }>(world.dbTarget, `SELECT request_id FROM request_logs ORDER BY request_id`);
  assert.deepEqual(got.map((r) => r.request_id), ['req_first', 'req_second'], 'each log once');
});
