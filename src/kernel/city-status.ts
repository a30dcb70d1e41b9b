// City status and settings on the hot path come from memory: pause/activate/remove/update
// refresh this process at once; other processes or isolates see a change within ttlMs (3 s),
// and at once where the database has a change feed (PostgreSQL's LISTEN/NOTIFY).
import type { Db } from '../db/database.ts';
import { parseCitySettings, type CitySettings } from './city-settings.ts';

export type CityStatus = 'active' | 'paused' | 'removed';

interface Entry {
  status: CityStatus | null;
  settings: CitySettings;
  at: number;
}

export class CityStatusCache {
  readonly db: Db;
  readonly ttlMs: number;
  #cache = new Map<string, Entry>();
  /** Loads under way: concurrent misses of one city share one query (a burst must not become N reads). */
  #loading = new Map<string, Promise<Entry>>();

  constructor(db: Db, ttlMs = 3000) {
    this.db = db;
    this.ttlMs = ttlMs;
    db.changes?.subscribe((topic, cityId) => {
      if (topic === 'city') {
        this.#cache.delete(cityId);
        this.#loading.delete(cityId);
      }
    });
  }

  async #entry(cityId: string): Promise<Entry> {
    const hit = this.#cache.get(cityId);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit;
    let loading = this.#loading.get(cityId);
    if (!loading) {
      loading = this.#load(cityId).finally(() => {
        if (this.#loading.get(cityId) === loading) this.#loading.delete(cityId);
      });
      this.#loading.set(cityId, loading);
    }
    return loading;
  }

  async #load(cityId: string): Promise<Entry> {
    const row = await this.db.kysely.selectFrom('cities').select(['status', 'settings']).where('city_id', '=', cityId).executeTakeFirst();
    return this.#put(cityId, row?.status ?? null, parseCitySettings(row?.settings));
  }

  /**
   * The city's status and settings when this process has them fresh in memory, else undefined
   * (then ask get/settings): the hot path answers a cache hit without creating a promise.
   */
  peek(cityId: string): { readonly status: CityStatus | null; readonly settings: CitySettings } | undefined {
    const hit = this.#cache.get(cityId);
    return hit && Date.now() - hit.at < this.ttlMs ? hit : undefined;
  }

  /** The status of a city, or null when no such city was ever created. */
  async get(cityId: string): Promise<CityStatus | null> {
    return (await this.#entry(cityId)).status;
  }

  /** The city's settings (limits, user budget); {} for an unknown city. */
  async settings(cityId: string): Promise<CitySettings> {
    return (await this.#entry(cityId)).settings;
  }

  /** This process changed the city: remember, and tell the other processes. */
  set(cityId: string, status: CityStatus | null, settings?: CitySettings): void {
    this.#put(cityId, status, settings ?? this.#cache.get(cityId)?.settings ?? {});
    this.db.changes?.publish('city', cityId);
  }

  #put(cityId: string, status: CityStatus | null, settings: CitySettings): Entry {
    if (this.#cache.size > 50_000) this.#cache.clear();
    const e = { status, settings, at: Date.now() };
    this.#cache.set(cityId, e);
    return e;
  }
}
