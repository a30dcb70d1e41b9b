// The windows engine's slices (issue 34), one row per process, scope and minute: what a live
// process took of a scope's windows. A process that stops renewing its rows (it died) has them
// swept by another: what its calls spent is estimated from the usage records of the scope since
// the slice was taken (every process's: never less than what that process spent), and only the
// rest goes back. So a crash no longer keeps a slice counted until it leaves its window.
export default [
  `CREATE TABLE IF NOT EXISTS window_slices (
     owner TEXT NOT NULL,
     scope TEXT NOT NULL,
     minute INTEGER NOT NULL,
     taken INTEGER NOT NULL,
     take_id TEXT NOT NULL,
     renewed_at INTEGER NOT NULL,
     created_at INTEGER NOT NULL,
     PRIMARY KEY (owner, scope, minute)
   )`,
  `CREATE INDEX IF NOT EXISTS window_slices_renewed ON window_slices (renewed_at)`,
];
