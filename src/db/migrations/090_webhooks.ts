// Webhooks (issue 28): endpoints per city, the outbox of messages to deliver (one row per event
// and endpoint, written in the same batch as the change it reports), every delivery attempt,
// per-city alert thresholds and the marks that make balance.low / budget.reached fire once.
// city_id '*' on an endpoint: the operator's (admin) endpoint.
export default [
  `CREATE TABLE IF NOT EXISTS webhook_endpoints (
     endpoint_id TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     url TEXT NOT NULL,
     events TEXT NOT NULL,
     description TEXT NOT NULL DEFAULT '',
     secret TEXT NOT NULL,
     enabled INTEGER NOT NULL DEFAULT 1,
     disabled_reason TEXT,
     failing_since INTEGER,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS webhook_endpoints_city ON webhook_endpoints (city_id)`,
  `CREATE TABLE IF NOT EXISTS webhook_messages (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     event_id TEXT NOT NULL,
     endpoint_id TEXT NOT NULL,
     city_id TEXT,
     user_id TEXT,
     type TEXT NOT NULL,
     data TEXT NOT NULL,
     status TEXT NOT NULL DEFAULT 'pending',
     attempts INTEGER NOT NULL DEFAULT 0,
     next_at INTEGER NOT NULL,
     locked_until INTEGER,
     last_status INTEGER,
     delivered_at INTEGER,
     created_at INTEGER NOT NULL,
     UNIQUE (event_id, endpoint_id)
   )`,
  `CREATE INDEX IF NOT EXISTS webhook_messages_due ON webhook_messages (status, next_at)`,
  `CREATE INDEX IF NOT EXISTS webhook_messages_endpoint ON webhook_messages (endpoint_id, status, seq)`,
  `CREATE TABLE IF NOT EXISTS webhook_attempts (
     attempt_id TEXT PRIMARY KEY NOT NULL,
     message_seq INTEGER NOT NULL,
     endpoint_id TEXT NOT NULL,
     event_id TEXT NOT NULL,
     status INTEGER,
     error TEXT,
     latency_ms INTEGER NOT NULL,
     response TEXT,
     created_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS webhook_attempts_message ON webhook_attempts (message_seq, created_at)`,
  `CREATE TABLE IF NOT EXISTS webhook_alerts (
     city_id TEXT PRIMARY KEY NOT NULL,
     balance_low INTEGER,
     updated_at INTEGER NOT NULL
   )`,
  `CREATE TABLE IF NOT EXISTS webhook_marks (
     kind TEXT NOT NULL,
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     mark TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     PRIMARY KEY (kind, city_id, user_id)
   )`,
  `CREATE INDEX IF NOT EXISTS webhook_marks_mark ON webhook_marks (mark)`,
];
