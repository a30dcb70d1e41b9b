// The margin per city (usage/stats, grouped by city): what the city's users were charged, what
// the same calls cost at the base prices, and the difference (the city's price multiplier and
// per-model prices, cities/update). Shown on the overview and the usage pages.
import { get, type Stats, type StatsRow } from '../api.ts';
import { Empty, num, Show, useLoad, usd } from '../ui.tsx';

/** A margin in credits and as a share of the base cost. */
export function Margin({ r }: { r: Pick<StatsRow, 'credits' | 'base_credits' | 'margin_credits'> }) {
  const m = r.margin_credits ?? 0;
  const pct = r.base_credits ? ` (${((m / r.base_credits) * 100).toFixed(1)} %)` : '';
  return <span title={usd(m)} class={m < 0 ? 'bad' : undefined}>{num(m)}<small class="muted">{pct}</small></span>;
}

export function CityMargins({ from, to, city }: { from?: string; to?: string; city?: string }) {
  const stats = useLoad(() => get<Stats>('usage/stats', { from, to, city_id: city, group: 'city' }), [from, to, city]);
  return (
    <section data-testid="city-margins">
      <h2>Margin per city</h2>
      <Show load={stats}>
        {(s) =>
          s.items.length === 0 ? (
            <Empty>No charged calls in this range.</Empty>
          ) : (
            <div class="table-wrap">
              <table class="striped">
                <thead>
                  <tr><th>City</th><th class="num">Calls</th><th class="num">Charged</th><th class="num">At base prices</th><th class="num">Margin</th></tr>
                </thead>
                <tbody>
                  {s.items.map((r) => (
                    <tr key={r.city_id ?? ''} data-city={r.city_id ?? ''}>
                      <td>{r.city_id ?? '(admin / no city)'}</td>
                      <td class="num">{num(r.calls)}</td>
                      <td class="num" title={usd(r.credits)}>{num(r.credits)}</td>
                      <td class="num" title={usd(r.base_credits ?? r.credits)}>{num(r.base_credits ?? r.credits)}</td>
                      <td class="num" data-testid="margin"><Margin r={r} /></td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Show>
    </section>
  );
}
