// Money leaks closed (issue 10): a usage record says when its tokens were estimated (the
// upstream reported none), and a payment keeps what was actually credited and how much of
// the price was not paid. Plain ADD COLUMNs of portable types (SQLite, D1, PostgreSQL).
export default [
  `ALTER TABLE usage ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0`,
  `ALTER TABLE payments ADD COLUMN credited INTEGER`,
  `ALTER TABLE payments ADD COLUMN shortfall INTEGER`,
];
