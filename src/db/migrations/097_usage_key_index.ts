// usage_by_key (092) indexed every record, but most calls carry no user API key (a user token,
// a city key): their NULL entries filled the index, and every call paid an index insert for
// nothing. The index now holds only the records made with a key. Every read by key filters
// `key_id = ?`, which implies `key_id IS NOT NULL`, so SQLite and PostgreSQL still use it.
export default [
  `DROP INDEX IF EXISTS usage_by_key`,
  {
    sqlite: `CREATE INDEX IF NOT EXISTS usage_by_key ON usage (key_id, created_at) WHERE key_id IS NOT NULL`,
    postgres: `CREATE INDEX IF NOT EXISTS usage_by_key ON usage (key_id, created_at, seq) WHERE key_id IS NOT NULL`,
  },
];
