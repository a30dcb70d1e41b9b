// The log line's timestamp is Date's ISO text, made once per second and completed per
// millisecond (kernel/log.ts): every millisecond must read as toISOString would write it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonLogger } from '../../src/kernel/log.ts';

test('each line’s `t` is the ISO time of its millisecond, across second, day and year boundaries', (t) => {
  let line = '';
  const log = jsonLogger((l) => (line = l));
  let now = Date.UTC(2026, 11, 31, 23, 59, 58, 985);
  t.mock.method(Date, 'now', () => now);
  for (let i = 0; i < 2100; i++) {
    now += i % 5 === 0 ? 0 : i % 11 === 0 ? 997 : 1; // the same millisecond again, one after, or a jump
    log('info', 'request', { status: 200 });
    const parsed = JSON.parse(line);
    assert.equal(parsed.t, new Date(now).toISOString());
    assert.deepEqual({ ...parsed, t: undefined }, { t: undefined, level: 'info', msg: 'request', status: 200 });
  }
});
