// Money: balances with an append-only ledger, holds (reservations for AI calls), payments
// and their webhook events, usage records with a daily rollup.
//
// Invariants the code keeps with single conditional statements and batches only:
//   balances.credits = Σ ledger.credits of that (city_id, user_id), at every commit;
//   balances.credits >= 0 (CHECK: a bug or a race fails the whole batch instead);
//   every ledger row has a unique idempotency_key, and the ledger is never updated or deleted.
export default [
  `CREATE TABLE IF NOT EXISTS balances (
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     credits INTEGER NOT NULL CHECK (credits >= 0),
     opened_entry TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     PRIMARY KEY (city_id, user_id)
   )`,
  `CREATE TABLE IF NOT EXISTS ledger (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     entry_id TEXT NOT NULL UNIQUE,
     idempotency_key TEXT NOT NULL UNIQUE,
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     credits INTEGER NOT NULL,
     balance_after INTEGER NOT NULL,
     kind TEXT NOT NULL,
     ref TEXT,
     request_id TEXT,
     model TEXT,
     reason TEXT,
     actor TEXT,
     created_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS ledger_user ON ledger (city_id, user_id, seq)`,
  `CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger
   BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END`,
  `CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger
   BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END`,
  `CREATE TABLE IF NOT EXISTS holds (
     hold_id TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     request_id TEXT NOT NULL,
     model TEXT NOT NULL,
     mode TEXT NOT NULL,
     credits INTEGER NOT NULL,
     status TEXT NOT NULL,
     cost INTEGER,
     closed_entry TEXT,
     created_at INTEGER NOT NULL,
     closed_at INTEGER
   )`,
  `CREATE INDEX IF NOT EXISTS holds_open ON holds (created_at) WHERE status = 'held'`,
  `CREATE TABLE IF NOT EXISTS payments (
     payment_id TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     provider TEXT NOT NULL,
     status TEXT NOT NULL,
     credits INTEGER NOT NULL,
     amount INTEGER NOT NULL,
     currency TEXT NOT NULL,
     units INTEGER,
     provider_ref TEXT,
     checkout_url TEXT,
     credit_entry TEXT,
     event_id TEXT,
     amount_paid INTEGER,
     error TEXT,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     paid_at INTEGER
   )`,
  `CREATE UNIQUE INDEX IF NOT EXISTS payments_ref ON payments (provider, provider_ref) WHERE provider_ref IS NOT NULL`,
  `CREATE INDEX IF NOT EXISTS payments_user ON payments (city_id, user_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS payments_time ON payments (created_at)`,
  `CREATE TABLE IF NOT EXISTS payment_events (
     provider TEXT NOT NULL,
     event_id TEXT NOT NULL,
     type TEXT NOT NULL,
     payment_id TEXT,
     outcome TEXT NOT NULL,
     deliveries INTEGER NOT NULL,
     first_at INTEGER NOT NULL,
     last_at INTEGER NOT NULL,
     PRIMARY KEY (provider, event_id)
   )`,
  `CREATE TABLE IF NOT EXISTS usage (
     seq INTEGER PRIMARY KEY,
     usage_id TEXT NOT NULL UNIQUE,
     request_id TEXT NOT NULL,
     city_id TEXT,
     user_id TEXT,
     identity TEXT NOT NULL,
     model TEXT NOT NULL,
     mode TEXT NOT NULL,
     status TEXT NOT NULL,
     error_code TEXT,
     input_tokens INTEGER NOT NULL,
     output_tokens INTEGER NOT NULL,
     cached_tokens INTEGER NOT NULL,
     images INTEGER NOT NULL,
     seconds REAL NOT NULL,
     credits INTEGER NOT NULL,
     duration_ms INTEGER NOT NULL,
     created_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS usage_user ON usage (city_id, user_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS usage_city ON usage (city_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS usage_model ON usage (model, created_at)`,
  `CREATE INDEX IF NOT EXISTS usage_time ON usage (created_at)`,
  `CREATE TABLE IF NOT EXISTS usage_daily (
     day TEXT NOT NULL,
     city_id TEXT NOT NULL,
     model TEXT NOT NULL,
     calls INTEGER NOT NULL,
     errors INTEGER NOT NULL,
     input_tokens INTEGER NOT NULL,
     output_tokens INTEGER NOT NULL,
     cached_tokens INTEGER NOT NULL,
     credits INTEGER NOT NULL,
     duration_ms INTEGER NOT NULL,
     PRIMARY KEY (day, city_id, model)
   )`,
];
