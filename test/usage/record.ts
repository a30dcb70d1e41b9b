// For the retention and partition tests: a usage record as the AI services hand it to the sink
// (one compat call of 100 credits, of any age), and the lease and hold that keep records alive.
import { sql } from 'kysely';
import type { Db } from '../../src/db/database.ts';
import type { MeterRecord } from '../../src/kernel/metering.ts';

export const meterRecord = (request_id: string, created_at: number, extra: Partial<MeterRecord> = {}): MeterRecord => ({
  request_id,
  city_id: 'c',
  user_id: 'u',
  identity: 'user',
  model: 'm',
  mode: 'compat',
  status: 'ok',
  input_tokens: 10,
  output_tokens: 20,
  cached_tokens: 0,
  images: 0,
  seconds: 0,
  credits: 100,
  duration_ms: 5,
  overhead_ms: 0.5,
  created_at,
  ...extra,
});

/** When a test sweeps the stranded lease: past BALANCE_LEASE_TTL_SECONDS (60 in those tests) after its last renewal. */
export const sweptAt = (heldAt: number) => heldAt + 61_000;

/**
 * What a retention pass must not prune away: a lease of user c/u that process 'dead-proc' took
 * at `leasedAt` and never returned (its calls' records are what the sweeper charges it from),
 * and an open hold for request 'req_held' (the hold sweeper settles it at that record's cost).
 * The lease was last renewed at `heldAt` (the process died just now): the gateway's own sweeper,
 * on its timer, must not take it before the test has written its records; the test sweeps it
 * itself with a clock a TTL later (sweptAt).
 */
export const strandedLeaseAndHold = (db: Db, leasedAt: number, heldAt: number) =>
  db.batch([
    sql`INSERT INTO leases (owner, city_id, user_id, credits, take_id, took, renewed_at, created_at) VALUES ('dead-proc', 'c', 'u', 5000, 't1', 5000, ${heldAt}, ${leasedAt})`.compile(db.kysely),
    sql`UPDATE balances SET leased = 5000 WHERE city_id = 'c' AND user_id = 'u'`.compile(db.kysely),
    sql`INSERT INTO holds (hold_id, city_id, user_id, request_id, model, mode, credits, status, created_at) VALUES ('h1', 'c', 'u', 'req_held', 'm', 'compat', 100, 'held', ${heldAt})`.compile(db.kysely),
  ]);
