// Runtime configuration: the `env` table first, then the process environment (or, on the
// edge, the Worker's bindings). Reads are synchronous from a snapshot so the hot path never
// waits on the database; writes update the snapshot at once, and other processes or
// isolates pick changes up within `ttlMs` (3 s), or at once where the database has a change
// feed (PostgreSQL's LISTEN/NOTIFY).
import type { Db } from '../db/database.ts';
import { isSealed, isSealedEnvKey, type SecretBox } from './secrets.ts';

export type ProcessEnv = Record<string, string | undefined>;

export interface EnvEntry {
  key: string;
  value: string;
}

export class RuntimeEnv {
  readonly db: Db;
  readonly processEnv: ProcessEnv;
  readonly ttlMs: number;
  #table = new Map<string, string>();
  /** Bumped on every change of the snapshot: what is derived from values can be kept until it moves. */
  #version = 0;
  /** Process-environment reads, remembered until the next refresh (process.env is slow to read). */
  #proc = new Map<string, string | undefined>();
  #loadedAt = 0;
  #loading: Promise<void> | null = null;
  /** Seals secret values on write and opens them on read (secrets at rest); null: stored in clear. */
  #box: SecretBox | null = null;
  /** Opened values by sealed form, so a refresh does not decrypt what it already has. */
  #opened = new Map<string, string>();

  constructor(db: Db, processEnv: ProcessEnv, ttlMs = 3000) {
    this.db = db;
    this.processEnv = processEnv;
    this.ttlMs = ttlMs;
    db.changes?.subscribe((topic) => {
      if (topic === 'env') this.#loadedAt = 0; // the next request reloads the snapshot
    });
  }

  /** The value of a key: env table first, then the process environment. Empty means unset. */
  get(key: string): string | undefined {
    const v = this.#table.get(key) ?? this.#fromProcess(key);
    return v === '' ? undefined : v;
  }

  #fromProcess(key: string): string | undefined {
    let v = this.#proc.get(key);
    if (v === undefined && !this.#proc.has(key)) {
      v = this.processEnv[key];
      if (this.#proc.size >= 1000) this.#proc.clear();
      this.#proc.set(key, v);
    }
    return v;
  }

  /** Changes whenever a value may have changed (a reload, a write): a cache of parsed values keys on it. */
  get version(): number {
    return this.#version;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  /** Where a key's value comes from now. */
  source(key: string): 'table' | 'process' | null {
    if (this.#table.has(key) && this.#table.get(key) !== '') return 'table';
    return this.processEnv[key] ? 'process' : null;
  }

  /** Entries of the env table, sorted by key. */
  entries(): EnvEntry[] {
    return [...this.#table].map(([key, value]) => ({ key, value })).sort((a, b) => a.key.localeCompare(b.key));
  }

  useSecrets(box: SecretBox | null): void {
    this.#box = box;
  }

  /** The box that seals secrets at rest (null: no master key, stored in clear); upstream keys use it too. */
  get secrets(): SecretBox | null {
    return this.#box;
  }

  /** The plaintext of a stored value (opens a sealed one). */
  async #open(key: string, stored: string): Promise<string | undefined> {
    if (!isSealed(stored)) return stored;
    const hit = this.#opened.get(stored);
    if (hit !== undefined) return hit;
    if (!this.#box) return undefined;
    try {
      const plain = await this.#box.open(stored, `env:${key}`);
      if (this.#opened.size > 10_000) this.#opened.clear();
      this.#opened.set(stored, plain);
      return plain;
    } catch {
      return undefined; // damaged or moved: as if unset (the boot check catches a wrong master key)
    }
  }

  async #seal(key: string, value: string): Promise<string> {
    if (!this.#box || !isSealedEnvKey(key) || value === '') return value;
    const sealed = await this.#box.seal(value, `env:${key}`);
    this.#opened.set(sealed, value);
    return sealed;
  }

  async refresh(): Promise<void> {
    this.#loading ??= (async () => {
      try {
        const rows = await this.db.kysely.selectFrom('env').select(['key', 'value']).execute();
        const table = new Map<string, string>();
        for (const r of rows) {
          const v = await this.#open(r.key, r.value);
          if (v !== undefined) table.set(r.key, v);
        }
        this.#table = table;
        this.#proc.clear();
        this.#version++;
        this.#loadedAt = Date.now();
      } finally {
        this.#loading = null;
      }
    })();
    return this.#loading;
  }

  /** Whether the snapshot is older than its TTL (fresh() would reload it). */
  stale(): boolean {
    return Date.now() - this.#loadedAt > this.ttlMs;
  }

  /** Keeps the snapshot as it is for `ms` more (its reload just failed: the database is away). */
  postpone(ms: number): void {
    this.#loadedAt = Date.now() - this.ttlMs + ms;
  }

  /** Reloads the snapshot when it is older than ttlMs (cheap: one small SELECT). */
  async fresh(): Promise<void> {
    if (this.stale()) await this.refresh();
  }

  async set(key: string, value: string): Promise<void> {
    await this.setMany([{ key, value }]);
  }

  /** Writes all entries atomically (one batch). */
  async setMany(entries: EnvEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const t = Date.now();
    const stored = await Promise.all(entries.map((e) => this.#seal(e.key, e.value)));
    await this.db.batch(
      entries.map((e, i) =>
        this.db.kysely
          .insertInto('env')
          .values({ key: e.key, value: stored[i], updated_at: t })
          .onConflict((oc) => oc.column('key').doUpdateSet({ value: stored[i], updated_at: t })),
      ),
    );
    for (const e of entries) this.#table.set(e.key, e.value);
    this.#version++;
    this.db.changes?.publish('env', '');
  }

  /** Inserts the value only if the key is absent; returns the value that is stored now. */
  async setIfAbsent(key: string, value: string): Promise<{ value: string; inserted: boolean }> {
    const res = await this.db.kysely
      .insertInto('env')
      .values({ key, value: await this.#seal(key, value), updated_at: Date.now() })
      .onConflict((oc) => oc.column('key').doNothing())
      .executeTakeFirst();
    const row = await this.db.kysely.selectFrom('env').select('value').where('key', '=', key).executeTakeFirstOrThrow();
    const stored = (await this.#open(key, row.value)) ?? '';
    this.#table.set(key, stored);
    this.#version++;
    return { value: stored, inserted: Number(res.numInsertedOrUpdatedRows ?? 0) > 0 };
  }

  async remove(key: string): Promise<boolean> {
    const res = await this.db.kysely.deleteFrom('env').where('key', '=', key).executeTakeFirst();
    this.#table.delete(key);
    this.#version++;
    this.db.changes?.publish('env', '');
    return Number(res.numDeletedRows) > 0;
  }
}
