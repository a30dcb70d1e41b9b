// Users' API keys (issue 33): `cg_key_<key_id>_<secret>`, stored as the SHA-256 of the whole key
// only. Processes cache keys they have verified and poll rows by updated_at (every change —
// revoke, update — bumps it), so a change reaches every process and replica within seconds.
// Usage records carry the key a call was made with.
export default [
  `CREATE TABLE IF NOT EXISTS user_keys (
     key_id TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     name TEXT NOT NULL,
     secret_hash TEXT NOT NULL,
     models TEXT,
     budget_credits INTEGER,
     budget_window TEXT,
     expires_at INTEGER,
     allowed_ips TEXT,
     rpm INTEGER,
     status TEXT NOT NULL DEFAULT 'active',
     revoked_at INTEGER,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     last_used_at INTEGER
   )`,
  `CREATE INDEX IF NOT EXISTS user_keys_user ON user_keys (city_id, user_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS user_keys_updated ON user_keys (updated_at)`,
  `ALTER TABLE usage ADD COLUMN key_id TEXT`,
  {
    sqlite: `CREATE INDEX IF NOT EXISTS usage_by_key ON usage (key_id, created_at)`,
    postgres: `CREATE INDEX IF NOT EXISTS usage_by_key ON usage (key_id, created_at, seq)`,
  },
];
