// City status on the hot path comes from memory: pause/activate/remove update this process
// at once; other processes or isolates see a change within ttlMs (3 s), and at once where the
// database has a change feed (PostgreSQL's LISTEN/NOTIFY).
import type { Db } from '../db/database.ts';

export type CityStatus = 'active' | 'paused' | 'removed';

export class CityStatusCache {
  readonly db: Db;
  readonly ttlMs: number;
  #cache = new Map<string, { status: CityStatus | null; at: number }>();

  constructor(db: Db, ttlMs = 3000) {
    this.db = db;
    this.ttlMs = ttlMs;
    db.changes?.subscribe((topic, cityId) => {
      if (topic === 'city') this.#cache.delete(cityId);
    });
  }

  /** The status of a city, or null when no such city was ever created. */
  async get(cityId: string): Promise<CityStatus | null> {
    const hit = this.#cache.get(cityId);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.status;
    const row = await this.db.kysely.selectFrom('cities').select('status').where('city_id', '=', cityId).executeTakeFirst();
    const status = row?.status ?? null;
    this.set(cityId, status, false);
    return status;
  }

  /** This process changed the city (or read it): remember, and tell the other processes. */
  set(cityId: string, status: CityStatus | null, changed = true): void {
    if (this.#cache.size > 50_000) this.#cache.clear();
    this.#cache.set(cityId, { status, at: Date.now() });
    if (changed) this.db.changes?.publish('city', cityId);
  }
}
