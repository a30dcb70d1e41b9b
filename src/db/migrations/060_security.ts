// Abuse resistance (issue 15): token revocation, key rotation, rate-limit counters, the
// master-key check of secrets at rest, per-city settings (limits, user budget), refunds.
export default [
  // Revoked tokens (logout: one jti) and revoked users (every token issued before `before_ms`).
  // Processes poll rows by created_at, so a revocation reaches all of them within seconds.
  `CREATE TABLE IF NOT EXISTS revocations (
     id TEXT PRIMARY KEY NOT NULL,
     kind TEXT NOT NULL,
     jti TEXT,
     city_id TEXT,
     user_id TEXT,
     before_ms INTEGER,
     expires_at INTEGER NOT NULL,
     created_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS revocations_created ON revocations (created_at)`,
  // A retired signing key keeps verifying until the tokens it signed have expired.
  `ALTER TABLE signing_keys ADD COLUMN retired_at INTEGER`,
  // Fixed-window counters: one row per limited subject, updated by one atomic UPSERT.
  `CREATE TABLE IF NOT EXISTS rate_counters (
     key TEXT PRIMARY KEY NOT NULL,
     window_start INTEGER NOT NULL,
     n INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS rate_counters_window ON rate_counters (window_start)`,
  // One row: a value encrypted under the master key, to refuse a wrong key at boot.
  `CREATE TABLE IF NOT EXISTS master_key_check (
     id TEXT PRIMARY KEY NOT NULL,
     fingerprint TEXT NOT NULL,
     sealed TEXT NOT NULL,
     created_at INTEGER NOT NULL
   )`,
  // Per-city settings as JSON: { limits?, user_budget? }.
  `ALTER TABLE cities ADD COLUMN settings TEXT`,
  // User budgets sum a user's spending since the start of the day or month.
  `CREATE INDEX IF NOT EXISTS ledger_user_time ON ledger (city_id, user_id, created_at)`,
  // Refunds and disputes: one row per provider refund (or dispute), keyed so a replay is a
  // no-op; what the payment bought is debited, and what the balance could not cover is the shortfall.
  `CREATE TABLE IF NOT EXISTS payment_refunds (
     refund_key TEXT PRIMARY KEY NOT NULL,
     payment_id TEXT NOT NULL,
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     provider TEXT NOT NULL,
     kind TEXT NOT NULL,
     amount INTEGER NOT NULL,
     currency TEXT,
     credits_due INTEGER NOT NULL,
     credits_debited INTEGER NOT NULL,
     shortfall INTEGER NOT NULL,
     event_id TEXT,
     entry_id TEXT NOT NULL,
     created_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS payment_refunds_payment ON payment_refunds (payment_id)`,
  `CREATE INDEX IF NOT EXISTS payment_refunds_city ON payment_refunds (city_id, created_at)`,
];
