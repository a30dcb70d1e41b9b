// Plans and subscriptions (issue 34), and the rolling-window allowances they and key budgets
// draw on (src/services/balance/windows/).
//
//   window_scopes   one row per scope ('sub:<id>', 'key:<id>'): the row every take locks first
//                   (PostgreSQL), and the all-time total of what was taken (a window without end).
//   window_buckets  per scope and UTC minute: credits taken in that minute (`used`, slices still
//                   held by live processes included) and the slices still open (`open_slices`).
//   plans           a city's plans, as data.
//   subscriptions   a user's subscription to a plan; at most one live per user of a city.
//   subscription_periods  one row per paid period (its invoice): the credits it grants.
//   subscription_events   provider events applied, by id: a replay finds its row and does nothing.
export default [
  `CREATE TABLE IF NOT EXISTS window_scopes (
     scope TEXT PRIMARY KEY NOT NULL,
     total INTEGER NOT NULL DEFAULT 0,
     updated_at INTEGER NOT NULL
   )`,
  `CREATE TABLE IF NOT EXISTS window_buckets (
     scope TEXT NOT NULL,
     minute INTEGER NOT NULL,
     used INTEGER NOT NULL DEFAULT 0,
     open_slices INTEGER NOT NULL DEFAULT 0,
     take_id TEXT,
     PRIMARY KEY (scope, minute)
   )`,
  `CREATE TABLE IF NOT EXISTS plans (
     plan_id TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     name TEXT NOT NULL,
     description TEXT NOT NULL DEFAULT '',
     billing_interval TEXT NOT NULL,
     amount INTEGER NOT NULL,
     currency TEXT NOT NULL,
     credits INTEGER NOT NULL,
     windows TEXT NOT NULL,
     models TEXT,
     limits TEXT,
     overflow INTEGER NOT NULL DEFAULT 1,
     stripe_price_id TEXT,
     creem_product_id TEXT,
     sort_order INTEGER NOT NULL DEFAULT 0,
     status TEXT NOT NULL DEFAULT 'active',
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS plans_city ON plans (city_id, sort_order)`,
  `CREATE TABLE IF NOT EXISTS subscriptions (
     subscription_id TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     plan_id TEXT NOT NULL,
     provider TEXT NOT NULL,
     provider_ref TEXT,
     customer_ref TEXT,
     checkout_ref TEXT,
     status TEXT NOT NULL,
     cancel_at_period_end INTEGER NOT NULL DEFAULT 0,
     period_start INTEGER,
     period_end INTEGER,
     past_due_since INTEGER,
     live INTEGER,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   )`,
  // live = 1 while incomplete, active or past due, NULL after: one live subscription per user.
  `CREATE UNIQUE INDEX IF NOT EXISTS subscriptions_live ON subscriptions (city_id, user_id, live)`,
  `CREATE INDEX IF NOT EXISTS subscriptions_ref ON subscriptions (provider, provider_ref)`,
  `CREATE TABLE IF NOT EXISTS subscription_periods (
     subscription_id TEXT NOT NULL,
     invoice_ref TEXT NOT NULL,
     period_start INTEGER NOT NULL,
     period_end INTEGER NOT NULL,
     credits INTEGER NOT NULL,
     revoked INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL,
     PRIMARY KEY (subscription_id, invoice_ref)
   )`,
  `CREATE TABLE IF NOT EXISTS subscription_events (
     provider TEXT NOT NULL,
     event_id TEXT NOT NULL,
     type TEXT NOT NULL,
     subscription_id TEXT,
     outcome TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     PRIMARY KEY (provider, event_id)
   )`,
];
