// The user's own usage: credits per day (uPlot, the console's chart) from usage/me/daily and
// the latest calls from usage/me, with model, tokens, cost and the key that made them.
// Read again every 3 s while the tab shows, so a call appears within seconds.
import { useState } from 'preact/hooks';
import { get, type Page, type UsageRecord } from '../api.ts';
import { DayChart } from '../chart.tsx';
import { Badge, Empty, ErrorBox, num, useLoad, usd, when } from '../ui.tsx';
import { usePoll, type DailyRow } from './hooks.ts';

const DAYS = 30;
const plural = (n: number, what: string) => `${num(n)} ${what}${n === 1 ? '' : 's'}`;

/** 11-28 14:05:09 (UTC): short enough for a phone's row. */
const shortTime = (iso: string) => `${iso.slice(5, 10)} ${iso.slice(11, 19)}`;

export function UsageSection({ keyNames }: { keyNames: Record<string, string> }) {
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [key, setKey] = useState('');
  const daily = useLoad(() => get<{ from: string; to: string; items: DailyRow[] }>('usage/me/daily', { days: DAYS, key_id: key }), [key]);
  const records = useLoad(() => get<Page<UsageRecord>>('usage/me', { limit: 25, cursor, key_id: key }), [cursor, key]);
  usePoll(() => {
    daily.reload();
    if (!cursor) records.reload();
  }, 3000, [cursor, key]);
  const keyIds = Object.keys(keyNames);

  const d = daily.data;
  const days: string[] = [];
  if (d) for (let t = Date.parse(`${d.from}T00:00:00Z`); t <= Date.parse(`${d.to}T00:00:00Z`); t += 86_400_000) days.push(new Date(t).toISOString().slice(0, 10));
  const credits: Record<string, number> = {};
  let total = 0;
  for (const r of d?.items ?? []) {
    credits[r.day] = r.credits;
    total += r.credits;
  }
  return (
    <section class="panel" aria-labelledby="usage-h">
      <header class="panel-head">
        <h2 id="usage-h">Usage</h2>
        {keyIds.length > 0 && (
          <select
            aria-label="Calls made with"
            value={key}
            onChange={(e) => {
              setKey(e.currentTarget.value);
              setCursor(undefined);
            }}
          >
            <option value="">All calls</option>
            {keyIds.map((id) => (
              <option key={id} value={id}>
                Key: {keyNames[id]}
              </option>
            ))}
          </select>
        )}
      </header>
      <ErrorBox error={daily.error} />
      {d && (
        <>
          <p class="muted">
            Last {DAYS} days: <strong data-testid="usage-total">{num(total)}</strong> credits ({usd(total)}) over {plural(d.items.reduce((s, r) => s + r.calls, 0), 'call')}.
          </p>
          <div class="chart-box">
            <DayChart title="Credits per day (UTC)" days={days} series={[{ label: 'credits', values: credits }]} height={200} />
          </div>
        </>
      )}
      <h3>Latest calls</h3>
      <ErrorBox error={records.error} />
      {records.data && records.data.items.length === 0 && !cursor && <Empty>No calls yet. Make a key below and call the API with it; calls show here within seconds.</Empty>}
      {records.data && records.data.items.length > 0 && (
        <div class="table-wrap">
          <table class="usage-table" data-testid="usage-table">
            <thead>
              <tr>
                <th>Time (UTC)</th>
                <th>Model</th>
                <th>Key</th>
                <th class="num">Tokens in / out</th>
                <th class="num">Cost (credits)</th>
                <th>Status</th>
              </tr>
            </thead>
            <tbody>
              {records.data.items.map((r) => (
                <tr key={r.usage_id} data-usage={r.usage_id}>
                  <td class="nowrap" data-label="Time" title={when(r.created_at)}>
                    {shortTime(r.created_at)}
                  </td>
                  <td class="model" data-label="Model">{r.model}</td>
                  <td class="key-name" data-label="Key">{r.key_id ? (keyNames[r.key_id] ?? r.key_id) : <span class="muted">sign-in token</span>}</td>
                  <td class="num" data-label="Tokens in / out">
                    {num(r.input_tokens)} / {num(r.output_tokens)}
                  </td>
                  <td class="num" data-label="Cost (credits)" title={usd(r.credits)}>
                    {num(r.credits)}
                  </td>
                  <td data-label="Status">
                    <span>
                      <Badge status={r.status} />
                      {r.error_code && <small class="muted"> {r.error_code}</small>}
                    </span>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="pager">
        {cursor && (
          <button type="button" class="secondary outline" onClick={() => setCursor(undefined)}>
            Newest
          </button>
        )}
        {records.data?.next_cursor && (
          <button type="button" class="secondary outline" onClick={() => setCursor(records.data!.next_cursor!)}>
            Older
          </button>
        )}
      </div>
    </section>
  );
}
