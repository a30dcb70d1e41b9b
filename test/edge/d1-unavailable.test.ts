// On Workers, a D1 that cannot serve (its database file locked by another writer: D1 answers
// "D1_ERROR: database is locked: SQLITE_BUSY") gives 503 database_unavailable with Retry-After in
// the one error shape, not a 500; once the lock is gone, the same calls succeed.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { startWorker } from '../helpers/worker.ts';

test('a D1 failure answers 503 database_unavailable with Retry-After, then serves again', async () => {
  const w = await startWorker();
  try {
    assert.equal((await fetch(`${w.url}/health`)).status, 200);
    const key = await w.adminKey();
    // Miniflare keeps the local D1 as a SQLite file; a writer holding it locked, as a long
    // `wrangler d1 execute --local` import would.
    const dir = join(w.persistDir, 'd1/miniflare-D1DatabaseObject');
    const file = readdirSync(dir).find((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite')!;
    const holder = new DatabaseSync(join(dir, file));
    holder.exec('BEGIN EXCLUSIVE');
    const create = () =>
      fetch(`${w.url}/v1/cities/create`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'D1', city_id: 'd1city' }) });
    try {
      const r = await create();
      assert.equal(r.status, 503, `${r.status} ${await r.clone().text()}\n${w.logs().slice(-2000)}`);
      assert.ok(Number(r.headers.get('retry-after')) > 0, 'Retry-After');
      const body = (await r.json()) as { error: { type: string; code: string; message: string } };
      assert.equal(body.error.code, 'database_unavailable');
      assert.equal(typeof body.error.type, 'string');
      assert.equal(typeof body.error.message, 'string');
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    const again = await create();
    assert.equal(again.status, 200, await again.text());
    assert.doesNotMatch(w.logs(), /unhandled error/);
  } finally {
    await w.stop();
  }
});
