// The ai service's queries (ai_jobs). Jobs are owned by (city, user); admins own theirs as
// identity 'admin' with no city.
import type { Db } from '../../db/database.ts';
import type { AiJobsTable } from '../../db/schema.ts';
import type { Identity } from '../../kernel/identity.ts';

export type JobRow = AiJobsTable;

export async function insertJob(db: Db, row: JobRow): Promise<void> {
  await db.kysely.insertInto('ai_jobs').values(row).execute();
}

export async function getJob(db: Db, jobId: string): Promise<JobRow | undefined> {
  return db.kysely.selectFrom('ai_jobs').selectAll().where('job_id', '=', jobId).executeTakeFirst();
}

/** The job if this identity may see it: its owner, or an admin. */
export async function getOwnedJob(db: Db, jobId: string, who: Identity): Promise<JobRow | undefined> {
  const row = await getJob(db, jobId);
  if (!row) return undefined;
  if (who.kind === 'admin') return row;
  if (who.kind === 'user' && row.identity === 'user' && row.city_id === who.cityId && row.user_id === who.userId) return row;
  return undefined;
}

export async function updateJob(db: Db, jobId: string, set: Partial<JobRow>): Promise<void> {
  await db.kysely.updateTable('ai_jobs').set({ ...set, updated_at: Date.now() }).where('job_id', '=', jobId).execute();
}
