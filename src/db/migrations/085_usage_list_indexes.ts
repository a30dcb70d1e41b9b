// usage/list at tens of millions of records (issue 27): its first page is an index range read
// newest first, on every filter. Pages are ordered by (created_at, seq); SQLite's indexes end
// in the rowid (= seq) by themselves, PostgreSQL's need seq spelled out, or a page is a sort of
// every matching row. And a filter by user alone (no city) gets its own index.
export default [
  {
    sqlite: `CREATE INDEX IF NOT EXISTS usage_by_user ON usage (user_id, created_at)`,
    postgres: `CREATE INDEX IF NOT EXISTS usage_by_user ON usage (user_id, created_at, seq)`,
  },
  { sqlite: `SELECT 1`, postgres: `CREATE INDEX IF NOT EXISTS usage_time_seq ON usage (created_at, seq)` },
  { sqlite: `SELECT 1`, postgres: `CREATE INDEX IF NOT EXISTS usage_city_seq ON usage (city_id, created_at, seq)` },
  { sqlite: `SELECT 1`, postgres: `CREATE INDEX IF NOT EXISTS usage_model_seq ON usage (model, created_at, seq)` },
  { sqlite: `SELECT 1`, postgres: `CREATE INDEX IF NOT EXISTS usage_user_seq ON usage (city_id, user_id, created_at, seq)` },
  { sqlite: `SELECT 1`, postgres: `DROP INDEX IF EXISTS usage_time` },
  { sqlite: `SELECT 1`, postgres: `DROP INDEX IF EXISTS usage_city` },
  { sqlite: `SELECT 1`, postgres: `DROP INDEX IF EXISTS usage_model` },
  { sqlite: `SELECT 1`, postgres: `DROP INDEX IF EXISTS usage_user` },
];
