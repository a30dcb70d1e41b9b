// Credit leases (issue 11): a gateway process takes a slice of a user's balance into memory,
// serves the holds of its calls from that slice, and writes their charges back in batches.
//
//   balances.leased — credits of the balance that open leases reserve. A lease is not spending:
//                     credits stays Σ ledger; only what is free to reserve (credits − leased)
//                     shrinks. Every reservation checks credits − leased.
//   leases          — one row per (process, user): what that process holds. `take_id`,
//                     `flush_id` and `swept_by` mark the batch that last changed the row, so the
//                     statements after it apply only when it did (the ledger's pattern), and a
//                     retried batch changes nothing twice.
export default [
  `ALTER TABLE balances ADD COLUMN leased INTEGER NOT NULL DEFAULT 0`,
  `CREATE TABLE IF NOT EXISTS leases (
     owner TEXT NOT NULL,
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     credits INTEGER NOT NULL,
     take_id TEXT NOT NULL,
     took INTEGER NOT NULL,
     flush_id TEXT,
     returned INTEGER NOT NULL DEFAULT 0,
     swept_by TEXT,
     renewed_at INTEGER NOT NULL,
     created_at INTEGER NOT NULL,
     PRIMARY KEY (owner, city_id, user_id)
   )`,
  `CREATE INDEX IF NOT EXISTS leases_renewed ON leases (renewed_at)`,
  // The process whose lease billed a call: a swept lease charges the usage its process recorded
  // but never wrote to the ledger (lease.ts, sweep).
  `ALTER TABLE usage ADD COLUMN lease_owner TEXT`,
];
