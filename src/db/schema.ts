import type { Generated } from 'kysely';

// Kysely table types. Times are Unix epoch milliseconds (INTEGER); flags are 0/1.
// Each service adds its tables here beside the migration that creates them.

export interface EnvTable {
  key: string;
  value: string;
  updated_at: number;
}

export interface CitiesTable {
  city_id: string;
  name: string;
  status: 'active' | 'paused' | 'removed';
  created_at: number;
  updated_at: number;
  /** JSON: { limits?, user_budget? } (cities/update). */
  settings: string | null;
}

export interface SigningKeysTable {
  kid: string;
  alg: string;
  private_jwk: string;
  public_jwk: string;
  status: 'active' | 'retired';
  created_at: number;
  retired_at: number | null;
}

export interface BureausTable {
  bureau_id: string;
  city_id: string;
  name: string;
  token_hash: string;
  created_at: number;
  revoked_at: number | null;
}

export interface AiJobsTable {
  job_id: string;
  kind: 'image' | 'video';
  city_id: string | null;
  user_id: string | null;
  identity: string;
  model: string;
  status: 'queued' | 'running' | 'succeeded' | 'failed';
  /** JSON of the request. */
  input: string;
  /** JSON: { files: [{ key, media_type }], seconds? } once succeeded. */
  result: string | null;
  error: string | null;
  /** The upstream's id of a long-running generation (video). */
  upstream_ref: string | null;
  /** JSON of the metering state (request id, credit hold) so a restarted runner can settle. */
  call: string;
  attempts: number;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** Pending background jobs of runtimes that keep their own queue (the Node runner). */
export interface JobQueueTable {
  id: string;
  service: string;
  type: string;
  job_id: string;
  run_at: number;
  locked_until: number | null;
  attempts: number;
  created_at: number;
}

export interface UsersTable {
  city_id: string;
  user_id: string;
  name: string | null;
  email: string | null;
  email_verified: number;
  avatar_url: string | null;
  /** The lower-cased email when a provider verified it, else null (the key for linking). */
  verified_email: string | null;
  /** 'local' | 'github' | 'google' | 'token' */
  created_via: string;
  created_at: number;
  updated_at: number;
  last_login_at: number | null;
}

export interface UserIdentitiesTable {
  city_id: string;
  provider: string;
  provider_user_id: string;
  user_id: string;
  username: string | null;
  email: string | null;
  email_verified: number;
  created_at: number;
  updated_at: number;
  last_login_at: number | null;
}

export interface OAuthStatesTable {
  state_hash: string;
  city_id: string;
  provider: string;
  /** The PKCE verifier; emptied once the callback has used it. */
  code_verifier: string;
  redirect_uri: string;
  return_to: string | null;
  /** pending → exchanging → done → delivered, or failed */
  status: 'pending' | 'exchanging' | 'done' | 'failed' | 'delivered';
  user_id: string | null;
  error: string | null;
  created_at: number;
  updated_at: number;
  expires_at: number;
}

// Money (migration 030_money). Credits are integers: 1 USD = 1,000,000 credits.
export interface BalancesTable {
  city_id: string;
  user_id: string;
  credits: number;
  /** Credits reserved by open leases (migration 070_leases). */
  leased: Generated<number>;
  opened_entry: string;
  created_at: number;
  updated_at: number;
}

export interface LedgerTable {
  seq: Generated<number>;
  entry_id: string;
  idempotency_key: string;
  city_id: string;
  user_id: string;
  credits: number;
  balance_after: number;
  kind: 'grant' | 'adjust' | 'hold' | 'settle' | 'release' | 'expire' | 'topup' | 'charge';
  ref: string | null;
  request_id: string | null;
  model: string | null;
  reason: string | null;
  actor: string | null;
  created_at: number;
}

/** Credit leases (migration 070_leases): what one process holds of one user's balance. */
export interface LeasesTable {
  owner: string;
  city_id: string;
  user_id: string;
  credits: number;
  take_id: string;
  took: number;
  flush_id: string | null;
  returned: Generated<number>;
  swept_by: string | null;
  renewed_at: number;
  created_at: number;
}

/** One row per committed lease flush (migration 080_lease_flushes): a retried flush that had committed fails on it. */
export interface LeaseFlushesTable {
  flush_id: string;
  owner: string;
  at: number;
}

export interface HoldsTable {
  hold_id: string;
  city_id: string;
  user_id: string;
  request_id: string;
  model: string;
  mode: string;
  credits: number;
  status: 'held' | 'settled' | 'released' | 'expired';
  cost: number | null;
  closed_entry: string | null;
  created_at: number;
  closed_at: number | null;
}

export interface PaymentsTable {
  payment_id: string;
  city_id: string;
  user_id: string;
  provider: 'a' | 'b';
  status: 'creating' | 'pending' | 'paid' | 'expired' | 'failed';
  credits: number;
  amount: number;
  currency: string;
  units: number | null;
  provider_ref: string | null;
  checkout_url: string | null;
  credit_entry: string | null;
  event_id: string | null;
  amount_paid: number | null;
  /** Credits actually credited (≤ credits: an underpaid checkout is credited pro rata). */
  credited: number | null;
  /** Minor units of the price that were not paid (> 0 only for an underpaid checkout). */
  shortfall: number | null;
  error: string | null;
  created_at: number;
  updated_at: number;
  paid_at: number | null;
}

export interface PaymentEventsTable {
  provider: string;
  event_id: string;
  type: string;
  payment_id: string | null;
  outcome: string;
  deliveries: number;
  first_at: number;
  last_at: number;
}

export interface UsageTable {
  seq: Generated<number>;
  usage_id: string;
  request_id: string;
  city_id: string | null;
  user_id: string | null;
  identity: string;
  model: string;
  mode: string;
  status: string;
  error_code: string | null;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  /** Prompt-cache writes (part of input_tokens) and their 1-hour share (migration 082). */
  cache_write_tokens: Generated<number>;
  cache_write_1h_tokens: Generated<number>;
  images: number;
  seconds: number;
  credits: number;
  duration_ms: number;
  /** citygate's own milliseconds (x-citygate-overhead-ms); null for calls recorded before it was kept. */
  overhead_ms: number | null;
  created_at: number;
  /** 1 when the upstream reported no usage and the tokens are citygate's estimate. */
  estimated: Generated<number>;
  /** The upstream that served the call (null: none reached, or a record from before 040). */
  upstream: string | null;
  /** Upstream attempts made (null on records from before 040). */
  attempts: number | null;
  /** The process whose credit lease billed the call (migration 070_leases). */
  lease_owner: string | null;
  /** A remark on the call, e.g. hosted tools a translated call left out (migration 082). */
  note: string | null;
  /** The cost at the base price (credits − base_credits = the city's margin); null on records before 083. */
  base_credits: number | null;
  /** The alias the caller asked for, when it named one (migration 083). */
  alias: string | null;
  /** The user API key the call was made with (migration 092), else null. */
  key_id: Generated<string | null>;
}

/** Models as data (ai/models/*, migration 083). NULL fields: the built-in model of that id decides. */
export interface AiModelsTable {
  model_id: string;
  name: string | null;
  description: string | null;
  /** JSON array of modes. */
  modes: string | null;
  provider: string | null;
  upstream_model: string | null;
  /** JSON price object in credits; NULL: the catalog's price. */
  prices: string | null;
  max_output_tokens: number | null;
  context_window: number | null;
  /** JSON array of alias ids. */
  aliases: string;
  /** 0 | 1 */
  enabled: number;
  created_at: number;
  updated_at: number;
}

export interface AiUpstreamsTable {
  upstream_id: string;
  name: string;
  kind: string;
  base_url: string;
  api_key: string | null;
  /** JSON array of model ids or {id, upstream_model}. */
  models: string;
  weight: number;
  priority: number;
  /** 0 | 1 */
  enabled: number;
  timeout_ms: number | null;
  created_at: number;
  updated_at: number;
}

/** The daily rollup (services/usage/rollup.ts): the hourly one's sums per UTC day, city and model. */
export interface UsageDailyTable extends RollupSums {
  /** `YYYY-MM-DD` (UTC). */
  day: string;
  /** '' for none. */
  city_id: string;
  model: string;
}

/** What every rollup row sums (services/usage/rollup.ts). */
export interface RollupSums {
  calls: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  credits: number;
  base_credits: number;
  duration_ms: number;
  /** Records with an overhead_ms, their largest, and their histogram h00…h39 (rollup.ts). */
  overhead_n: number;
  overhead_max: number;
  [bucket: `h${number}`]: number;
}

export interface UsageHourlyTable extends RollupSums {
  /** Start of the hour, epoch ms. */
  hour: number;
  /** '' for none, here and in upstream. */
  city_id: string;
  model: string;
  mode: string;
  status: string;
  upstream: string;
}

export interface RevocationsTable {
  id: string;
  kind: 'token' | 'user';
  jti: string | null;
  city_id: string | null;
  user_id: string | null;
  before_ms: number | null;
  expires_at: number;
  created_at: number;
}

export interface RateCountersTable {
  key: string;
  window_start: number;
  n: number;
}

export interface MasterKeyCheckTable {
  id: string;
  fingerprint: string;
  sealed: string;
  created_at: number;
}

export interface PaymentRefundsTable {
  refund_key: string;
  payment_id: string;
  city_id: string;
  user_id: string;
  provider: string;
  kind: 'refund' | 'dispute';
  amount: number;
  currency: string | null;
  credits_due: number;
  credits_debited: number;
  shortfall: number;
  event_id: string | null;
  entry_id: string;
  created_at: number;
}

export interface MigrationsTable {
  name: string;
  applied_at: number;
}

// Plans and rolling windows (issue 34, migration 094).
export interface WindowScopesTable {
  scope: string;
  total: number;
  updated_at: number;
}

export interface WindowBucketsTable {
  scope: string;
  minute: number;
  used: number;
  open_slices: number;
  take_id: string | null;
}

export interface WindowSlicesTable {
  owner: string;
  scope: string;
  minute: number;
  taken: number;
  take_id: string;
  renewed_at: number;
  created_at: number;
}

export interface PlansTable {
  plan_id: string;
  city_id: string;
  name: string;
  description: string;
  billing_interval: 'month' | 'year';
  amount: number;
  currency: string;
  credits: number;
  /** JSON: [{ seconds, limit }] */
  windows: string;
  /** JSON string[] or null (all the city's models) */
  models: string | null;
  /** JSON CityLimits or null (the city's) */
  limits: string | null;
  overflow: number;
  stripe_price_id: string | null;
  creem_product_id: string | null;
  sort_order: number;
  status: 'active' | 'archived';
  created_at: number;
  updated_at: number;
}

export interface SubscriptionsTable {
  subscription_id: string;
  city_id: string;
  user_id: string;
  plan_id: string;
  provider: 'stripe' | 'creem' | 'manual';
  provider_ref: string | null;
  customer_ref: string | null;
  checkout_ref: string | null;
  status: 'incomplete' | 'active' | 'past_due' | 'canceled' | 'ended';
  cancel_at_period_end: number;
  period_start: number | null;
  period_end: number | null;
  past_due_since: number | null;
  live: number | null;
  created_at: number;
  updated_at: number;
}

export interface SubscriptionPeriodsTable {
  subscription_id: string;
  invoice_ref: string;
  period_start: number;
  period_end: number;
  credits: number;
  revoked: number;
  created_at: number;
}

export interface SubscriptionEventsTable {
  provider: string;
  event_id: string;
  type: string;
  subscription_id: string | null;
  outcome: string;
  created_at: number;
}

export interface Schema {
  env: EnvTable;
  cities: CitiesTable;
  signing_keys: SigningKeysTable;
  bureaus: BureausTable;
  ai_jobs: AiJobsTable;
  job_queue: JobQueueTable;
  users: UsersTable;
  user_identities: UserIdentitiesTable;
  oauth_states: OAuthStatesTable;
  balances: BalancesTable;
  leases: LeasesTable;
  lease_flushes: LeaseFlushesTable;
  ledger: LedgerTable;
  holds: HoldsTable;
  payments: PaymentsTable;
  payment_events: PaymentEventsTable;
  usage: UsageTable;
  usage_daily: UsageDailyTable;
  usage_daily_city: Omit<UsageDailyTable, 'model'>;
  usage_daily_model: Omit<UsageDailyTable, 'city_id'>;
  usage_hourly: UsageHourlyTable;
  request_logs: RequestLogsTable;
  ai_upstreams: AiUpstreamsTable;
  ai_models: AiModelsTable;
  revocations: RevocationsTable;
  rate_counters: RateCountersTable;
  master_key_check: MasterKeyCheckTable;
  payment_refunds: PaymentRefundsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_messages: WebhookMessagesTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_alerts: WebhookAlertsTable;
  webhook_marks: WebhookMarksTable;
  user_keys: UserKeysTable;
  window_scopes: WindowScopesTable;
  window_buckets: WindowBucketsTable;
  window_slices: WindowSlicesTable;
  plans: PlansTable;
  subscriptions: SubscriptionsTable;
  subscription_periods: SubscriptionPeriodsTable;
  subscription_events: SubscriptionEventsTable;
  mcp_servers: McpServersTable;
  _migrations: MigrationsTable;
}

// Request logs (issue 27, migration 086): one row per logged AI call; bodies in blob storage.
export interface RequestLogsTable {
  log_id: string;
  request_id: string;
  city_id: string | null;
  user_id: string | null;
  identity: string;
  /** 'metadata' or 'full'. */
  mode: string;
  /** The action's route, e.g. /v1/ai/chat/completions. */
  route: string;
  model: string | null;
  status: number;
  /** JSON: request and response headers (redacted), sizes, timings, error. */
  meta: string;
  /** The blob with the bodies (full mode), or null. */
  blob_key: string | null;
  request_bytes: number;
  response_bytes: number;
  /** 1 when a body was cut at the cap. */
  truncated: number;
  created_at: number;
}

// Webhooks (issue 28, migration 090).
export interface WebhookEndpointsTable {
  endpoint_id: string;
  /** '*': the operator's endpoint. */
  city_id: string;
  url: string;
  /** JSON array of event types ('*': all). */
  events: string;
  description: string;
  /** The signing secret, sealed when there is a master key. */
  secret: string;
  enabled: number;
  disabled_reason: string | null;
  failing_since: number | null;
  created_at: number;
  updated_at: number;
}

export interface WebhookMessagesTable {
  seq: Generated<number>;
  event_id: string;
  endpoint_id: string;
  city_id: string | null;
  user_id: string | null;
  type: string;
  /** JSON object: the event's data. */
  data: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  next_at: number;
  locked_until: number | null;
  last_status: number | null;
  delivered_at: number | null;
  created_at: number;
}

export interface WebhookAttemptsTable {
  attempt_id: string;
  message_seq: number;
  endpoint_id: string;
  event_id: string;
  status: number | null;
  error: string | null;
  latency_ms: number;
  response: string | null;
  created_at: number;
}

export interface WebhookAlertsTable {
  city_id: string;
  balance_low: number | null;
  updated_at: number;
}

export interface WebhookMarksTable {
  kind: string;
  city_id: string;
  user_id: string;
  mark: string;
  created_at: number;
}

// Users' API keys (issue 33, migration 092): the key is `cg_key_<key_id>_<secret>`; only its hash is kept.
export interface UserKeysTable {
  key_id: string;
  city_id: string;
  user_id: string;
  name: string;
  /** SHA-256 (hex) of the whole key string. */
  secret_hash: string;
  /** JSON array of model ids or aliases, or null (any the city allows). */
  models: string | null;
  budget_credits: number | null;
  /** 'day' | 'week' | '30d', or null with budget_credits: a total budget. */
  budget_window: string | null;
  expires_at: number | null;
  /** JSON array of CIDRs or addresses, or null (any). */
  allowed_ips: string | null;
  rpm: number | null;
  status: 'active' | 'revoked';
  revoked_at: number | null;
  created_at: number;
  /** Bumped by every change: processes poll by it. */
  updated_at: number;
  last_used_at: number | null;
}

// MCP servers per city (issue 36, migration 096).
export interface McpServersTable {
  server_id: string;
  city_id: string;
  /** Unique in the city; the prefix of its tools' names (`<name>__<tool>`). */
  name: string;
  url: string;
  /** 'none' | 'headers' | 'oauth'. */
  auth_type: string;
  /** The credentials as JSON, sealed at rest (null: none). */
  auth: string | null;
  /** 'all' | 'allow' | 'deny': how `tools` (a JSON array of tool names) filters. */
  tool_filter: string;
  tools: string;
  /** Credits per call, and per-tool overrides (JSON object tool → credits). */
  price: number;
  prices: string;
  timeout_ms: number;
  enabled: number;
  description: string;
  created_at: number;
  updated_at: number;
}
