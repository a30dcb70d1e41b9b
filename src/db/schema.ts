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
}

export interface SigningKeysTable {
  kid: string;
  alg: string;
  private_jwk: string;
  public_jwk: string;
  status: 'active' | 'retired';
  created_at: number;
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
  _migrations: MigrationsTable;
}
