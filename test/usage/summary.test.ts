// usage/summary answers a page of day × city × model items (limit, cursor) with the totals of
// the whole range on every page; the pages together are the whole answer, each item once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { METERING, type MeterRecord } from '../../src/kernel/metering.ts';
import type { UsageBuffer } from '../../src/services/usage/index.ts';
import { inProcessGateway } from '../money/in-process.ts';

const DAY = 86_400_000;
const TODAY = Math.floor(Date.now() / DAY) * DAY;
const day = (t: number) => new Date(t).toISOString().slice(0, 10);

test('usage/summary pages its items by limit and cursor; totals cover the whole range; a bad cursor or limit is a 400', async () => {
  const w = await inProcessGateway('summary-pages', { USAGE_FLUSH_MS: '60000' });
  const get = async (path: string) => {
    const r = await w.gw.fetch(new Request(`http://x${path}`, { headers: { authorization: `Bearer ${w.gw.context.env.get('GATEWAY_ADMIN_SECRET_KEY')}` } }));
    return { status: r.status, body: (await r.json()) as any };
  };
  try {
    const sink = w.gw.context.use<UsageBuffer>(METERING)!;
    // 2 days × 3 cities × 2 models = 12 items; 24 records
    let n = 0;
    for (const d of [TODAY - DAY, TODAY]) {
      for (const city of ['p-a', 'p-b', 'p-c']) {
        for (const model of ['m1', 'm2']) {
          for (let i = 0; i < 2; i++) {
            sink.record({ request_id: `r${n++}`, city_id: city, user_id: 'u', identity: 'user', model, mode: 'compat', status: 'ok', input_tokens: 1, output_tokens: 2, cached_tokens: 0, images: 0, seconds: 0, credits: n, duration_ms: 1, created_at: d + 1000 + i } as MeterRecord);
          }
        }
      }
    }
    await sink.flush();
    const range = `from=${day(TODAY - DAY)}&to=${day(TODAY)}`;
    const whole = await get(`/v1/usage/summary?${range}`);
    assert.equal(whole.status, 200);
    assert.equal(whole.body.items.length, 12);
    assert.equal(whole.body.next_cursor, null);
    assert.equal(whole.body.totals.calls, 24);

    const seen: unknown[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { status: number; body: any } = await get(`/v1/usage/summary?${range}&limit=5${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(page.status, 200);
      assert.ok(page.body.items.length <= 5);
      assert.deepEqual(page.body.totals, whole.body.totals, 'every page carries the totals of the whole range');
      seen.push(...page.body.items);
      cursor = page.body.next_cursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen, whole.body.items, 'the pages, in order, are the whole answer');

    const one = await get(`/v1/usage/summary?${range}&city_id=p-b&limit=1`);
    assert.equal(one.body.items.length, 1);
    assert.equal(one.body.totals.calls, 8, 'the totals of the city over the range');

    const bad = await get(`/v1/usage/summary?${range}&cursor=not-a-cursor`);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_cursor');
    assert.equal((await get(`/v1/usage/summary?${range}&limit=0`)).status, 400);
    assert.equal((await get(`/v1/usage/summary?${range}&limit=10001`)).status, 400);
  } finally {
    await w.close();
  }
});
