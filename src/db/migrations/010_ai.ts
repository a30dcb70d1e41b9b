// The ai service's jobs (image and video generation), and the job queue of runtimes that
// keep their own (the Node runner; Workers use Cloudflare Queues instead and leave it empty).
export default [
  `CREATE TABLE IF NOT EXISTS ai_jobs (
     job_id TEXT PRIMARY KEY NOT NULL,
     kind TEXT NOT NULL,
     city_id TEXT,
     user_id TEXT,
     identity TEXT NOT NULL,
     model TEXT NOT NULL,
     status TEXT NOT NULL,
     input TEXT NOT NULL,
     result TEXT,
     error TEXT,
     upstream_ref TEXT,
     call TEXT NOT NULL,
     attempts INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     finished_at INTEGER
   )`,
  `CREATE INDEX IF NOT EXISTS ai_jobs_owner ON ai_jobs (city_id, user_id, created_at)`,
  `CREATE TABLE IF NOT EXISTS job_queue (
     id TEXT PRIMARY KEY NOT NULL,
     service TEXT NOT NULL,
     type TEXT NOT NULL,
     job_id TEXT NOT NULL,
     run_at INTEGER NOT NULL,
     locked_until INTEGER,
     attempts INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL
   )`,
  `CREATE INDEX IF NOT EXISTS job_queue_due ON job_queue (run_at)`,
];
