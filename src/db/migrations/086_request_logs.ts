// Request logs (issue 27, part 4): one row per logged AI call, linked to its usage record by
// request_id. Headers, sizes and timings (redacted) are in `meta`; the bodies of a `full` log
// are a blob (files/ on Node, R2 on Workers) named by blob_key, never in this table.
export default [
  `CREATE TABLE IF NOT EXISTS request_logs (
     log_id TEXT PRIMARY KEY NOT NULL,
     request_id TEXT NOT NULL,
     city_id TEXT,
     user_id TEXT,
     identity TEXT NOT NULL,
     mode TEXT NOT NULL,
     route TEXT NOT NULL,
     model TEXT,
     status INTEGER NOT NULL,
     meta TEXT NOT NULL,
     blob_key TEXT,
     request_bytes INTEGER NOT NULL DEFAULT 0,
     response_bytes INTEGER NOT NULL DEFAULT 0,
     truncated INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS request_logs_request ON request_logs (request_id)`,
  `CREATE INDEX IF NOT EXISTS request_logs_time ON request_logs (created_at)`,
];
