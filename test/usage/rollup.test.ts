// The hourly rollup is kept by the same batches as the records it sums: after a race of 400
// calls (JSON and streamed, two cities, several users, ok and failed), every rollup row equals
// the raw records' sums, and usage/summary and usage/stats (which read the rollup) equal them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startAiWorld, tokenFor } from '../ai/setup.ts';
import { call } from '../helpers/http.ts';
import { row, rows, until } from '../money/setup.ts';

const HOUR = 3_600_000;

test('rollups equal the raw sums after a 400-call race; summary and stats read them', async () => {
  const w = await startAiWorld({
    env: { MODEL_PRICES: JSON.stringify({ 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } }), BALANCE_INITIAL_CREDITS: '1000000000', USAGE_FLUSH_MS: '5', USAGE_BATCH_SIZE: '37', HTTP_MAX_CONNECTIONS_PER_IP: '0' },
  });
  try {
    const users: string[] = [];
    for (let i = 0; i < 10; i++) users.push(await tokenFor(w.admin, i % 2 ? 'roll-a' : 'roll-b', `u${i}`));
    const rs = await Promise.all(
      Array.from({ length: 400 }, (_, i) =>
        call(w.gw.url, 'POST', '/v1/ai/chat/completions', {
          token: users[i % users.length],
          body: {
            model: i % 9 === 0 ? 'stub-500' : 'stub-model', // the stub fails these: error records
            stream: i % 3 === 0,
            ...(i % 3 === 0 ? { stream_options: { include_usage: true } } : {}),
            messages: [{ role: 'user', content: `roll ${'w '.repeat(i % 17)}` }],
          },
        }),
      ),
    );
    assert.ok(rs.some((r) => r.status === 200) && rs.some((r) => r.status >= 500), rs.map((r) => r.status).join(','));
    const count = async () => (await row<{ n: number }>(w.gw, `SELECT COUNT(*) AS n FROM usage WHERE city_id IN ('roll-a', 'roll-b')`)).n;
    await until(async () => (await count()) === 400, 15_000, 'all 400 records written');

    const raw = await rows<Record<string, number | string>>(
      w.gw,
      `SELECT (created_at / ${HOUR}) * ${HOUR} AS hour, city_id, model, mode, status, COALESCE(upstream, '') AS upstream, COUNT(*) AS calls,
        SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, SUM(cached_tokens) AS cached_tokens, SUM(credits) AS credits,
        SUM(duration_ms) AS duration_ms, COUNT(overhead_ms) AS overhead_n
       FROM usage WHERE city_id IN ('roll-a', 'roll-b') GROUP BY (created_at / ${HOUR}) * ${HOUR}, city_id, model, mode, status, COALESCE(upstream, '')
       ORDER BY hour, city_id, model, mode, status, upstream`,
    );
    const rolled = await rows<Record<string, number | string>>(
      w.gw,
      `SELECT hour, city_id, model, mode, status, upstream, calls, input_tokens, output_tokens, cached_tokens, credits, duration_ms, overhead_n
       FROM usage_hourly WHERE city_id IN ('roll-a', 'roll-b') ORDER BY hour, city_id, model, mode, status, upstream`,
    );
    assert.ok(raw.length >= 4, `groups: ${raw.length}`);
    assert.deepEqual(rolled.map((r) => ({ ...r })), raw.map((r) => ({ ...r })));
    // the daily rollup: the same sums per UTC day, city and model
    const byDay = new Map<string, { calls: number; credits: number; input_tokens: number }>();
    for (const r of raw) {
      const k = `${new Date(Number(r.hour)).toISOString().slice(0, 10)}|${r.city_id}|${r.model}`;
      const g = byDay.get(k) ?? { calls: 0, credits: 0, input_tokens: 0 };
      g.calls += Number(r.calls);
      g.credits += Number(r.credits);
      g.input_tokens += Number(r.input_tokens);
      byDay.set(k, g);
    }
    const daily = await rows<{ day: string; city_id: string; model: string; calls: number; credits: number; input_tokens: number }>(
      w.gw,
      `SELECT day, city_id, model, calls, credits, input_tokens FROM usage_daily WHERE city_id IN ('roll-a', 'roll-b')`,
    );
    assert.equal(daily.length, byDay.size);
    for (const d of daily) assert.deepEqual({ calls: d.calls, credits: d.credits, input_tokens: d.input_tokens }, byDay.get(`${d.day}|${d.city_id}|${d.model}`));

    const day = new Date().toISOString().slice(0, 10);
    const sums = await row<{ calls: number; credits: number; input_tokens: number; errors: number }>(
      w.gw,
      `SELECT COUNT(*) AS calls, SUM(credits) AS credits, SUM(input_tokens) AS input_tokens, SUM(CASE WHEN status <> 'ok' THEN 1 ELSE 0 END) AS errors FROM usage WHERE city_id = 'roll-a'`,
    );
    const summary = await w.admin.get(`/v1/usage/summary?city_id=roll-a&from=${day}&to=${day}`);
    assert.equal(summary.status, 200, summary.text);
    const t = summary.body.totals;
    assert.deepEqual({ calls: t.calls, credits: t.credits, input_tokens: t.input_tokens, errors: t.errors }, { ...sums });
    const stats = await w.admin.get(`/v1/usage/stats?city_id=roll-a&group=city&from=${day}&to=${day}`);
    assert.equal(stats.status, 200, stats.text);
    assert.deepEqual(
      { calls: stats.body.totals.calls, credits: stats.body.totals.credits, input_tokens: stats.body.totals.input_tokens, errors: stats.body.totals.errors },
      { ...sums },
    );
    assert.ok(stats.body.totals.overhead_p99_ms > 0);
  } finally {
    await w.close();
  }
});
