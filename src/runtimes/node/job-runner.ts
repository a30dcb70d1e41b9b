// The durable in-process job runner of the Node runtime, behind the kernel's JobQueue.
// Every enqueued message is a row of `job_queue` first, so a restart picks unfinished jobs up
// again. A runner claims a due row with one UPDATE (a lease), runs it, and deletes it; a
// RetryJob reschedules it. On graceful stop, leases of running jobs are released at once so
// the next boot re-runs them. While a job runs its runner renews the lease (every leaseMs / 3),
// so a live runner keeps its jobs however long they take, and a dead one's (SIGKILL, a lost
// machine) are taken over by any other process or replica once leaseMs has passed.
//
// Claiming: on SQLite a conditional UPDATE (only one process's statement can move an expired
// lease); on PostgreSQL one UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED), so runners of
// many replicas never wait on each other's candidate rows.
import type { ExpressionBuilder } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Schema } from '../../db/schema.ts';
import type { Gateway } from '../../kernel/gateway.ts';
import { RetryJob, type JobMessage, type JobQueue } from '../../kernel/jobs.ts';
import type { Logger } from '../../kernel/log.ts';

export interface JobRunnerOptions {
  concurrency?: number;
  pollMs?: number;
  leaseMs?: number;
  maxAttempts?: number;
}

export class NodeJobRunner implements JobQueue {
  readonly db: Db;
  readonly log: Logger;
  readonly concurrency: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  readonly maxAttempts: number;
  #gateway: Gateway | null = null;
  #running = new Map<string, Promise<void>>();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #stopped = false;
  #ticking = false;
  #again = false;
  #heartbeat: ReturnType<typeof setInterval> | null = null;

  constructor(db: Db, log: Logger, opts: JobRunnerOptions = {}) {
    this.db = db;
    this.log = log;
    this.concurrency = opts.concurrency ?? 4;
    this.pollMs = opts.pollMs ?? 1000;
    this.leaseMs = opts.leaseMs ?? 60_000;
    this.maxAttempts = opts.maxAttempts ?? 1000;
  }

  async enqueue(msg: JobMessage, opts?: { delayMs?: number }): Promise<void> {
    const now = Date.now();
    await this.db.kysely
      .insertInto('job_queue')
      .values({ id: `${msg.service}:${msg.type}:${msg.id}`, service: msg.service, type: msg.type, job_id: msg.id, run_at: now + (opts?.delayMs ?? 0), locked_until: null, attempts: 0, created_at: now })
      .onConflict((oc) => oc.column('id').doUpdateSet({ run_at: now + (opts?.delayMs ?? 0) }))
      .execute();
    if (!opts?.delayMs) this.#kick();
  }

  /** Starts running due jobs (call after the gateway's init). */
  start(gateway: Gateway): void {
    this.#gateway = gateway;
    this.#heartbeat = setInterval(() => void this.#renew(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.#heartbeat.unref?.();
    this.#kick();
  }

  /** Extends the leases of the jobs this runner is running. */
  async #renew(): Promise<void> {
    const ids = [...this.#running.keys()];
    if (ids.length === 0 || this.#stopped) return;
    try {
      await this.db.kysely.updateTable('job_queue').set({ locked_until: Date.now() + this.leaseMs }).where('id', 'in', ids).execute();
    } catch (e) {
      this.log('error', 'job runner: renewing leases failed', { error: String(e) });
    }
  }

  #kick(): void {
    if (!this.#gateway || this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    queueMicrotask(() => void this.#tick());
  }

  async #tick(): Promise<void> {
    if (this.#ticking) {
      this.#again = true;
      return;
    }
    this.#ticking = true;
    try {
      do {
        this.#again = false;
        while (!this.#stopped && this.#running.size < this.concurrency) {
          const row = await this.#claim();
          if (!row) break;
          const p = this.#run(row).finally(() => {
            this.#running.delete(row.id);
            this.#kick();
          });
          this.#running.set(row.id, p);
        }
      } while (this.#again && !this.#stopped);
    } catch (e) {
      if (!this.#gateway?.context.databaseDown(e)) this.log('error', 'job runner: claiming failed', { error: String(e) });
    } finally {
      this.#ticking = false;
      if (!this.#stopped) {
        if (this.#timer) clearTimeout(this.#timer);
        this.#timer = setTimeout(() => void this.#tick(), this.pollMs);
        this.#timer.unref?.();
      }
    }
  }

  async #claim() {
    const now = Date.now();
    const free = (eb: ExpressionBuilder<Schema, 'job_queue'>) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]);
    const lease = (eb: ExpressionBuilder<Schema, 'job_queue'>) => ({ locked_until: now + this.leaseMs, attempts: eb('attempts', '+', 1) });
    if (this.db.dialect === 'postgres') {
      const running = [...this.#running.keys()];
      const row = await this.db.kysely
        .updateTable('job_queue')
        .set(lease)
        .where('id', '=', (eb) => {
          let q = eb.selectFrom('job_queue').select('id').where('run_at', '<=', now).where(free);
          if (running.length) q = q.where('id', 'not in', running);
          return q.orderBy('run_at').limit(1).forUpdate().skipLocked();
        })
        .where(free)
        .returningAll()
        .executeTakeFirst();
      return row ?? null;
    }
    const due = await this.db.kysely
      .selectFrom('job_queue')
      .select('id')
      .where('run_at', '<=', now)
      .where(free)
      .orderBy('run_at')
      .limit(this.concurrency * 2)
      .execute();
    for (const { id } of due) {
      if (this.#running.has(id)) continue;
      // One statement: only one runner (of any process) wins the lease.
      const won = await this.db.kysely.updateTable('job_queue').set(lease).where('id', '=', id).where(free).returningAll().executeTakeFirst();
      if (won) return won;
    }
    return null;
  }

  async #run(row: { id: string; service: string; type: string; job_id: string; attempts: number }): Promise<void> {
    const msg: JobMessage = { service: row.service, type: row.type, id: row.job_id };
    try {
      await this.#gateway!.runJob(msg);
      if (this.#stopped) return; // lease released by stop(): leave the row for the next boot
      await this.db.kysely.deleteFrom('job_queue').where('id', '=', row.id).execute();
    } catch (e) {
      if (this.#stopped) return;
      const retry = e instanceof RetryJob;
      if (!retry) this.log('error', 'job failed', { service: msg.service, type: msg.type, id: msg.id, error: String(e) });
      if (row.attempts >= this.maxAttempts || (!retry && row.attempts >= 3)) {
        await this.db.kysely.deleteFrom('job_queue').where('id', '=', row.id).execute();
        return;
      }
      const delay = retry ? e.delayMs : Math.min(60_000, 1000 * 2 ** row.attempts);
      await this.db.kysely.updateTable('job_queue').set({ run_at: Date.now() + delay, locked_until: null }).where('id', '=', row.id).execute();
      if (delay < this.pollMs) setTimeout(() => this.#kick(), delay).unref?.();
    }
  }

  /** Stops claiming and releases the leases of running jobs so the next boot runs them again. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    const ids = [...this.#running.keys()];
    if (ids.length) await this.db.kysely.updateTable('job_queue').set({ locked_until: null }).where('id', 'in', ids).execute();
  }
}
