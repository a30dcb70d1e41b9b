// Calls, tokens, credits and errors for today / 7 / 30 days, per city and per model, with
// citygate's p50/p99 overhead (from usage/stats).
import { useState } from 'preact/hooks';
import { get, type Stats, type StatsRow } from '../api.ts';
import { DayChart, type DaySeries } from '../chart.tsx';
import { useCities } from '../cities.ts';
import { daysAgo, Empty, ms, num, PageHead, Show, today, useLoad, usd } from '../ui.tsx';
import { href } from '../router.ts';
import { Margin } from './margins.tsx';

const RANGES = [
  { id: 'today', label: 'Today', days: 1 },
  { id: '7d', label: '7 days', days: 7 },
  { id: '30d', label: '30 days', days: 30 },
];

function daysOf(from: string, to: string): string[] {
  const out: string[] = [];
  for (let t = Date.parse(from); t <= Date.parse(to); t += 86_400_000) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

function seriesBy(rows: StatsRow[], key: 'city_id' | 'model', value: (r: StatsRow) => number): DaySeries[] {
  const by = new Map<string, Record<string, number>>();
  for (const r of rows) {
    const k = (r[key] ?? '(none)') as string;
    const v = by.get(k) ?? {};
    v[r.day!] = (v[r.day!] ?? 0) + value(r);
    by.set(k, v);
  }
  return [...by].map(([label, values]) => ({ label, values }));
}

function Breakdown({ title, rows, keyOf }: { title: string; rows: StatsRow[]; keyOf: (r: StatsRow) => string }) {
  return (
    <section>
      <h2>{title}</h2>
      <div class="table-wrap">
        <table class="striped">
          <thead>
            <tr>
              <th>{title.replace('By ', '')}</th>
              <th class="num">Calls</th>
              <th class="num">Errors</th>
              <th class="num">Tokens in / out</th>
              <th class="num">Credits</th>
              <th class="num">Overhead p50</th>
              <th class="num">p99</th>
              <th class="num">Margin</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={keyOf(r)}>
                <td>{keyOf(r)}</td>
                <td class="num">{num(r.calls)}</td>
                <td class="num">{num(r.errors)}</td>
                <td class="num">
                  {num(r.input_tokens)} / {num(r.output_tokens)}
                </td>
                <td class="num" title={usd(r.credits)}>{num(r.credits)}</td>
                <td class="num">{ms(r.overhead_p50_ms)}</td>
                <td class="num">{ms(r.overhead_p99_ms)}</td>
                <td class="num" data-testid="margin"><Margin r={r} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

export function Overview() {
  const [range, setRange] = useState('7d');
  const [city, setCity] = useState('');
  const cities = useCities();
  const days = RANGES.find((r) => r.id === range)!.days;
  const from = daysAgo(days - 1);
  const to = today();
  const stats = useLoad(async () => {
    const q = (group: string) => get<Stats>('usage/stats', { from, to, city_id: city, group });
    const [byCity, byModel, dayCity, dayModel] = await Promise.all([q('city'), q('model'), q('day,city'), q('day,model')]);
    return { byCity, byModel, dayCity, dayModel };
  }, [range, city]);

  return (
    <>
      <PageHead title="Overview">
        <div role="group" aria-label="Range">
          {RANGES.map((r) => (
            <button key={r.id} type="button" class={r.id === range ? '' : 'secondary outline'} aria-pressed={r.id === range} onClick={() => setRange(r.id)}>
              {r.label}
            </button>
          ))}
        </div>
        {cities.data && cities.data.length > 1 && (
          <select aria-label="City" value={city} onChange={(e) => setCity(e.currentTarget.value)}>
            <option value="">All cities</option>
            {cities.data.map((c) => (
              <option key={c.city_id} value={c.city_id}>{c.name} ({c.city_id})</option>
            ))}
          </select>
        )}
      </PageHead>
      <Show load={stats}>
        {({ byCity, byModel, dayCity, dayModel }) => {
          const t = byCity.totals;
          const dayList = daysOf(from, to);
          return (
            <>
              <div class="cards" aria-busy={stats.loading}>
                <div class="card"><span>Calls</span><strong data-testid="total-calls">{num(t.calls)}</strong></div>
                <div class="card"><span>Tokens in / out</span><strong>{num(t.input_tokens)} / {num(t.output_tokens)}</strong></div>
                <div class="card"><span>Credits</span><strong title={usd(t.credits)}>{num(t.credits)}</strong><small>{usd(t.credits)}</small></div>
                <div class="card"><span>Margin</span><strong data-testid="total-margin" title={usd(t.margin_credits ?? 0)}>{num(t.margin_credits ?? 0)}</strong><small>over base prices{t.base_credits ? ` (${(((t.margin_credits ?? 0) / t.base_credits) * 100).toFixed(1)} %)` : ''}</small></div>
                <div class="card"><span>Errors</span><strong class={t.errors ? 'bad' : ''}>{num(t.errors)}</strong></div>
                <div class="card"><span>Overhead p50 / p99</span><strong>{ms(t.overhead_p50_ms)} / {ms(t.overhead_p99_ms)}</strong></div>
              </div>
              {!byCity.overhead_sample.complete && (
                <p><small class="muted">Overhead percentiles from the newest {num(byCity.overhead_sample.records)} calls of this range.</small></p>
              )}
              {t.calls === 0 ? (
                <Empty>
                  No model calls in this range. Create a city and try a model in the <a href={href('playground')}>Playground</a>, or call{' '}
                  <code>/v1/ai/chat/completions</code> with a user token.
                </Empty>
              ) : (
                <>
                  <div class="charts">
                    <DayChart title="Calls per day by city" days={dayList} series={seriesBy(dayCity.items, 'city_id', (r) => r.calls)} />
                    <DayChart title="Tokens per day by model" days={dayList} series={seriesBy(dayModel.items, 'model', (r) => r.input_tokens + r.output_tokens)} />
                    <DayChart title="Credits per day by city" days={dayList} series={seriesBy(dayCity.items, 'city_id', (r) => r.credits)} />
                    <DayChart title="Errors per day by model" days={dayList} series={seriesBy(dayModel.items, 'model', (r) => r.errors)} />
                  </div>
                  <Breakdown title="By city" rows={byCity.items} keyOf={(r) => r.city_id ?? '(admin / no city)'} />
                  <Breakdown title="By model" rows={byModel.items} keyOf={(r) => r.model ?? ''} />
                </>
              )}
            </>
          );
        }}
      </Show>
    </>
  );
}
