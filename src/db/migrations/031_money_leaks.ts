// Money leaks closed (issue 10): a usage record says when its tokens were estimated (the
// upstream reported none), and a payment keeps what was actually credited and how much of
// the price was not paid; the hold sweeper finds a call's usage record by its request id (to
// settle a hold whose settle never committed). Plain ADD COLUMNs of portable types and a
// plain index (SQLite, D1, PostgreSQL).
export default [
  `CREATE INDEX IF NOT EXISTS usage_request ON usage (request_id)`,
  `ALTER TABLE usage ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0`,
  `ALTER TABLE payments ADD COLUMN credited INTEGER`,
  `ALTER TABLE payments ADD COLUMN shortfall INTEGER`,
];
