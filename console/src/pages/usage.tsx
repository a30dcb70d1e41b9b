// Usage records: filters (city, user, API key, model, status, dates), cursor pages and a CSV export of
// every record that matches (streamed by usage/export); a record's request log (when one was
// kept: REQUEST_LOG) opens beneath it.
import { useState } from 'preact/hooks';
import { get, request, type Page, type UsageRecord } from '../api.ts';
import { useCities } from '../cities.ts';
import { Badge, Empty, ErrorBox, ms, num, PageHead, Show, useAction, useLoad, when } from '../ui.tsx';
import { CityMargins } from './margins.tsx';
import { RequestLogView } from './request-log.tsx';

interface Filters { city_id: string; user_id: string; key_id: string; model: string; status: string; from: string; to: string }
const EMPTY: Filters = { city_id: '', user_id: '', key_id: '', model: '', status: '', from: '', to: '' };


/** The filters as usage/list wants them: `to` is exclusive, so the end date's whole day counts. */
function query(f: Filters) {
  const nextDay = (d: string) => new Date(Date.parse(d) + 86_400_000).toISOString().slice(0, 10);
  return { ...f, to: f.to ? nextDay(f.to) : '' };
}

export function Usage() {
  const cities = useCities();
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [cursors, setCursors] = useState<string[]>([]); // cursors of the pages before this one
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const page = useLoad(() => get<Page<UsageRecord>>('usage/list', { ...query(filters), cursor, limit: 50 }), [filters, cursor]);
  const exp = useAction();
  const [exported, setExported] = useState<string | null>(null);
  const [opened, setOpened] = useState<string | null>(null); // the usage record whose request log is shown

  const set = (k: keyof Filters) => (e: Event) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).value });
  const apply = (f: Filters) => {
    setFilters(f);
    setCursor(undefined);
    setCursors([]);
  };

  // The gateway streams the CSV (usage/export, page by page); the browser saves it as a file.
  const exportCsv = () =>
    exp.run(async () => {
      const res = await request('GET', 'usage/export', { query: { ...query(filters), format: 'csv' } });
      const blob = await res.blob();
      const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? 'citygate-usage.csv';
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = name;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
      setExported(`Exported ${name} (${num(blob.size)} bytes).`);
    });

  return (
    <>
      <PageHead title="Usage">
        <button type="button" class="secondary" aria-busy={exp.busy} disabled={exp.busy} onClick={exportCsv}>
          Export CSV
        </button>
      </PageHead>
      <form class="filters" onSubmit={(e) => (e.preventDefault(), apply(draft))}>
        <div class="filter-grid">
          <label>
            City
            <select name="city_id" value={draft.city_id} onChange={set('city_id')}>
              <option value="">All</option>
              {(cities.data ?? []).map((c) => (
                <option key={c.city_id} value={c.city_id}>{c.city_id}</option>
              ))}
            </select>
          </label>
          <label>User<input name="user_id" value={draft.user_id} onInput={set('user_id')} placeholder="any" /></label>
          <label>API key<input name="key_id" value={draft.key_id} onInput={set('key_id')} placeholder="any (cg_key_…)" /></label>
          <label>Model<input name="model" value={draft.model} onInput={set('model')} placeholder="any" /></label>
          <label>
            Status
            <select name="status" value={draft.status} onChange={set('status')}>
              <option value="">Any</option>
              <option value="ok">ok</option>
              <option value="error">error</option>
              <option value="aborted">aborted</option>
            </select>
          </label>
          <label>From<input type="date" name="from" value={draft.from} onInput={set('from')} /></label>
          <label>To<input type="date" name="to" value={draft.to} onInput={set('to')} /></label>
        </div>
        <div class="filter-actions">
          <button type="submit">Apply filters</button>
          <button type="button" class="secondary outline" onClick={() => (setDraft(EMPTY), apply(EMPTY))}>Clear</button>
        </div>
      </form>
      <CityMargins from={filters.from || undefined} to={filters.to || undefined} city={filters.city_id || undefined} />
      <ErrorBox error={exp.error} />
      {exported && <p role="status" class="ok">{exported}</p>}
      <Show load={page}>
        {(p) =>
          p.items.length === 0 ? (
            <Empty>
              {Object.values(filters).some(Boolean) ? 'No usage records match these filters: widen them or clear them.' : 'No usage yet: every model call through /v1/ai is recorded here. Try one in the Playground.'}
            </Empty>
          ) : (
            <>
              <div class="table-wrap">
                <table class="striped" data-testid="usage-table">
                  <thead>
                    <tr><th>When</th><th>City / user</th><th>Model</th><th>Status</th><th class="num">Tokens in / out</th><th class="num" title="Prompt-cache tokens, both part of the input: read from the cache / written to it">Cache read / write</th><th class="num">Credits</th><th class="num">Duration</th><th class="num">Overhead</th><th aria-label="Request log" /></tr>
                  </thead>
                  <tbody>
                    {p.items.map((u) => [
                      <tr key={u.usage_id} class={opened === u.usage_id ? 'selected' : undefined}>
                        <td>{when(u.created_at)}</td>
                        <td>{u.city_id ?? '—'} / {u.user_id ?? '—'}{u.key_id && <div><small class="muted" data-testid="usage-key">key cg_key_{u.key_id}</small></div>}</td>
                        <td>{u.model} <small class="muted">{u.mode}</small>{u.alias && <div><small class="muted">as {u.alias}</small></div>}</td>
                        <td><Badge status={u.status} />{u.error_code && <small> {u.error_code}</small>}{u.note && <small class="muted"> {u.note}</small>}</td>
                        <td class="num" title={u.estimated ? 'estimated: the upstream reported no usage' : undefined}>{u.estimated ? '~' : ''}{num(u.input_tokens)} / {num(u.output_tokens)}</td>
                        <td class="num" title={u.cache_write_1h_tokens ? `${num(u.cache_write_1h_tokens)} of the writes to the 1-hour cache` : undefined}>{num(u.cached_tokens)} / {num(u.cache_write_tokens ?? 0)}</td>
                        <td class="num" data-testid="credits">{num(u.credits)}{u.margin_credits ? <div><small class="muted">margin {num(u.margin_credits)}</small></div> : null}</td>
                        <td class="num">{ms(u.duration_ms)}</td>
                        <td class="num">{ms(u.overhead_ms)}</td>
                        <td>
                          <button type="button" class="secondary outline auto small nowrap" aria-expanded={opened === u.usage_id} onClick={() => setOpened(opened === u.usage_id ? null : u.usage_id)}>
                            {opened === u.usage_id ? 'Hide log' : 'Log'}
                          </button>
                        </td>
                      </tr>,
                      opened === u.usage_id && (
                        <tr key={`${u.usage_id}-log`}>
                          <td colSpan={10}><RequestLogView usageId={u.usage_id} /></td>
                        </tr>
                      ),
                    ])}
                  </tbody>
                </table>
              </div>
              <div class="pager">
                <button type="button" class="secondary outline" disabled={cursors.length === 0} onClick={() => (setCursor(cursors[cursors.length - 1] || undefined), setCursors(cursors.slice(0, -1)))}>
                  Newer
                </button>
                <button type="button" class="secondary outline" disabled={!p.next_cursor} onClick={() => (setCursors([...cursors, cursor ?? '']), setCursor(p.next_cursor!))}>
                  Older
                </button>
              </div>
            </>
          )
        }
      </Show>
    </>
  );
}
