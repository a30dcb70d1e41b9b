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

export interface UsageDailyTable {
  day: string;
  city_id: string;
  model: string;
  calls: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  credits: number;
  duration_ms: number;
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
  ledger: LedgerTable;
  holds: HoldsTable;
  payments: PaymentsTable;
  payment_events: PaymentEventsTable;
  usage: UsageTable;
  usage_daily: UsageDailyTable;
  ai_upstreams: AiUpstreamsTable;
  revocations: RevocationsTable;
  rate_counters: RateCountersTable;
  master_key_check: MasterKeyCheckTable;
  payment_refunds: PaymentRefundsTable;
  _migrations: MigrationsTable;
}
