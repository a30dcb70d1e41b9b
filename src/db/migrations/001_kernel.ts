// env first with key and value as its first columns, so an operator can read the admin key
// with: SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'
export default [
  `CREATE TABLE IF NOT EXISTS env (
     key TEXT PRIMARY KEY NOT NULL,
     value TEXT NOT NULL,
     updated_at INTEGER NOT NULL
   )`,
  `CREATE TABLE IF NOT EXISTS cities (
     city_id TEXT PRIMARY KEY NOT NULL,
     name TEXT NOT NULL,
     status TEXT NOT NULL DEFAULT 'active',
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   )`,
  // At most one active signing key: concurrent first boots race on this index, one wins.
  `CREATE TABLE IF NOT EXISTS signing_keys (
     kid TEXT PRIMARY KEY NOT NULL,
     alg TEXT NOT NULL,
     private_jwk TEXT NOT NULL,
     public_jwk TEXT NOT NULL,
     status TEXT NOT NULL,
     created_at INTEGER NOT NULL
   )`,
  `CREATE UNIQUE INDEX IF NOT EXISTS signing_keys_one_active ON signing_keys (status) WHERE status = 'active'`,
  `CREATE TABLE IF NOT EXISTS bureaus (
     bureau_id TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     name TEXT NOT NULL,
     token_hash TEXT NOT NULL UNIQUE,
     created_at INTEGER NOT NULL,
     revoked_at INTEGER
   )`,
  `CREATE INDEX IF NOT EXISTS bureaus_city ON bureaus (city_id, created_at)`,
];
