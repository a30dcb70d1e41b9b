// One row per committed lease flush (issue 23): a flush whose COMMIT was lost with its
// connection (a database restart, a failover) is retried as the very same batch, and this row,
// written first in it, makes that retry fail on its primary key whenever the first attempt had
// committed — including flushes whose other statements are guarded by rows the first attempt
// removed (an idle lease's), which would otherwise apply their balance change a second time.
// Rows older than an hour are removed by later flushes.
export default [
  `CREATE TABLE IF NOT EXISTS lease_flushes (
     flush_id TEXT PRIMARY KEY,
     owner TEXT NOT NULL,
     at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS lease_flushes_at ON lease_flushes (at)`,
];
