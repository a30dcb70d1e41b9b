// Prompt-cache writes on usage records (issue 25): cache_write_tokens beside cached_tokens (both
// parts of input_tokens), the 1-hour cache's share of the writes (priced apart), and a note
// (e.g. hosted tools a translated call left out). The daily rollup sums the writes too. Older
// records have none (0, NULL).
export default [
  `ALTER TABLE usage ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0`,
  `ALTER TABLE usage ADD COLUMN cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0`,
  `ALTER TABLE usage ADD COLUMN note TEXT`,
  `ALTER TABLE usage_daily ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0`,
];
