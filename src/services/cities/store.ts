import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import { eventStatement } from '../webhooks/events.ts';
import type { CitiesTable } from '../../db/schema.ts';

export type CityRow = CitiesTable;

export async function listCities(db: Db, only?: string): Promise<CityRow[]> {
  let q = db.kysely.selectFrom('cities').selectAll().where('status', '!=', 'removed');
  if (only) q = q.where('city_id', '=', only);
  return q.orderBy('created_at').orderBy('city_id').execute();
}

export async function getCity(db: Db, cityId: string): Promise<CityRow | undefined> {
  return db.kysely.selectFrom('cities').selectAll().where('city_id', '=', cityId).executeTakeFirst();
}

/** Inserts a city; false when the id is taken (removed cities keep their id forever). */
export async function insertCity(db: Db, cityId: string, name: string): Promise<CityRow | null> {
  const t = Date.now();
  const res = await db.kysely
    .insertInto('cities')
    .values({ city_id: cityId, name, status: 'active', created_at: t, updated_at: t })
    .onConflict((oc) => oc.column('city_id').doNothing())
    .executeTakeFirst();
  if (Number(res.numInsertedOrUpdatedRows ?? 0) === 0) return null;
  return { city_id: cityId, name, status: 'active', created_at: t, updated_at: t, settings: null };
}

/** Moves a live city to a status; a removed city never comes back. */
export async function setCityStatus(db: Db, cityId: string, status: CityRow['status']): Promise<CityRow | undefined> {
  const at = Date.now();
  await db.batch([
    db.kysely.updateTable('cities').set({ status, updated_at: at }).where('city_id', '=', cityId).where('status', '!=', 'removed').where('status', '!=', status),
    // city.paused / city.activated (webhooks), in the same batch as the change.
    ...(status === 'removed'
      ? []
      : [eventStatement(db, { type: status === 'paused' ? 'city.paused' : 'city.activated', cityId, data: { status }, at, when: sql`EXISTS (SELECT 1 FROM cities WHERE city_id = ${cityId} AND status = ${status} AND updated_at = ${at})` })]),
  ]);
  return getCity(db, cityId);
}
