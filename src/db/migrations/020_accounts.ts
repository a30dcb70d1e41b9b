// accounts: the users of each city, the OAuth identities that sign them in, and the
// single-use OAuth login states (a state row is the login attempt and its result).
export default [
  `CREATE TABLE IF NOT EXISTS users (
     city_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     name TEXT,
     email TEXT,
     email_verified INTEGER NOT NULL DEFAULT 0,
     avatar_url TEXT,
     verified_email TEXT,
     created_via TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     last_login_at INTEGER,
     PRIMARY KEY (city_id, user_id)
   )`,
  `CREATE INDEX IF NOT EXISTS users_city_created ON users (city_id, created_at, user_id)`,
  `CREATE INDEX IF NOT EXISTS users_created ON users (created_at, city_id, user_id)`,
  `CREATE INDEX IF NOT EXISTS users_verified_email ON users (city_id, verified_email) WHERE verified_email IS NOT NULL`,
  `CREATE TABLE IF NOT EXISTS user_identities (
     city_id TEXT NOT NULL,
     provider TEXT NOT NULL,
     provider_user_id TEXT NOT NULL,
     user_id TEXT NOT NULL,
     username TEXT,
     email TEXT,
     email_verified INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     last_login_at INTEGER,
     PRIMARY KEY (city_id, provider, provider_user_id)
   )`,
  `CREATE INDEX IF NOT EXISTS user_identities_user ON user_identities (city_id, user_id)`,
  // The state itself is never stored, only its SHA-256: the state is what collects the result.
  `CREATE TABLE IF NOT EXISTS oauth_states (
     state_hash TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     provider TEXT NOT NULL,
     code_verifier TEXT NOT NULL,
     redirect_uri TEXT NOT NULL,
     return_to TEXT,
     status TEXT NOT NULL,
     user_id TEXT,
     error TEXT,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     expires_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS oauth_states_expires ON oauth_states (expires_at)`,
];
