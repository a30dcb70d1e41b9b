// Which database errors answer 503 database_unavailable (with Retry-After) instead of a 500:
// the failures of the database's service, never a bad statement. The D1 messages are those seen
// from workerd (the internal error came from a locked D1 file on a loaded machine, in
// test/edge/d1-unavailable.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDatabaseUnavailable } from '../../src/db/unavailable.ts';

test('D1: a lock, a lost connection, a reset or an internal error of its storage is "unavailable"; a bad statement is not', () => {
  const unavailable = [
    'D1_ERROR: database is locked: SQLITE_BUSY',
    'D1_ERROR: Failed to get session commit token: internal error; reference = 9ugam6102m5sjo7ter45ntvk',
    'D1_ERROR: Network connection lost.',
    'D1_ERROR: Internal error while starting up D1 DB storage caused object to be reset.',
    'D1_ERROR: D1 DB is overloaded. Too many requests queued.',
  ];
  for (const m of unavailable) assert.equal(isDatabaseUnavailable(new Error(m)), true, m);
  // the cause chain is followed, as Kysely wraps what the driver threw
  assert.equal(isDatabaseUnavailable(new Error('query failed', { cause: new Error(unavailable[1]) })), true);
  const bugs = [
    'D1_ERROR: near "SELEC": syntax error at offset 0: SQLITE_ERROR',
    'D1_ERROR: UNIQUE constraint failed: cities.id: SQLITE_CONSTRAINT',
    'D1_ERROR: no such table: citiez: SQLITE_ERROR',
    'internal error', // not D1's: citygate's own bug stays a 500
  ];
  for (const m of bugs) assert.equal(isDatabaseUnavailable(new Error(m)), false, m);
});
