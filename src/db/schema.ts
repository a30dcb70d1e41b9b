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

export interface MigrationsTable {
  name: string;
  applied_at: number;
}

export interface Schema {
  env: EnvTable;
  cities: CitiesTable;
  signing_keys: SigningKeysTable;
  bureaus: BureausTable;
  _migrations: MigrationsTable;
}
