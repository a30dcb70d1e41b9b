// A worker thread that repeats one DELETE on its own connection to the database file, off the
// gateway's event loop (node:sqlite is synchronous: a batch run on the event loop makes every
// call served meanwhile wait; measured +26 % on a charged call's p99 while a day was pruned).
// See node-sqlite.ts repeatDelete(). WAL lets the gateway's connection read meanwhile; its
// writes wait for a batch's lock at most, which batches are kept small for.
import { parentPort, workerData } from 'node:worker_threads';
import { DatabaseSync } from 'node:sqlite';

export interface DeleteJob {
  path: string;
  busyTimeoutMs: number;
  sql: string;
  parameters: (string | number | bigint | null)[];
  /** Rows per statement: fewer affected means done. */
  batch: number;
  /** The pause after a batch, as a multiple of the time it took (at least 5 ms). */
  pace: number;
  /** Run after each batch (PRAGMA incremental_vacuum: the file shrinks as it goes). */
  after?: string;
  /** Set to 1 by the gateway to stop between batches. */
  stop: Int32Array;
}

const job = workerData as DeleteJob;
const db = new DatabaseSync(job.path, { timeout: job.busyTimeoutMs });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let deleted = 0;
try {
  const del = db.prepare(job.sql);
  const after = job.after ? db.prepare(job.after) : null;
  for (;;) {
    if (Atomics.load(job.stop, 0)) break;
    const t = performance.now();
    const n = Number(del.run(...job.parameters).changes);
    deleted += n;
    after?.all(); // a PRAGMA frees one page per step: all() steps it to the end
    if (n < job.batch) break;
    await sleep(Math.max(5, job.pace * (performance.now() - t)));
  }
  parentPort!.postMessage({ deleted, done: true });
} catch (e) {
  parentPort!.postMessage({ deleted, error: { message: (e as Error).message, code: (e as { code?: string }).code } });
} finally {
  db.close();
}
