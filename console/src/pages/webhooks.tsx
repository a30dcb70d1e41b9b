// Webhooks per city: endpoints (the signing secret shown once), recent deliveries with every
// attempt, redeliver, and a test event. A bureau sees its own city; the admin any city and the
// operator's endpoints (city '*').
import { useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { useWho } from '../app.tsx';
import { useCities } from '../cities.ts';
import { go } from '../router.ts';
import { Badge, ConfirmButton, Empty, ErrorBox, OneTimeSecret, PageHead, Show, ms, useAction, useLoad, when } from '../ui.tsx';

interface Endpoint { endpoint_id: string; city_id: string; url: string; events: string[]; description: string; enabled: boolean; disabled_reason: string | null; failing_since: string | null; created_at: string }
interface Attempt { status: number | null; error: string | null; latency_ms: number; response: string | null; created_at: string }
interface Delivery { event_id: string; type: string; user_id: string | null; status: string; attempts: number; last_status: number | null; next_attempt_at: string | null; created_at: string; payload: string; attempt_log: Attempt[] }

const CITY_EVENTS = ['payment.succeeded', 'payment.refunded', 'payment.disputed', 'balance.low', 'budget.reached', 'user.created', 'city.paused', 'city.activated', 'subscription.created', 'subscription.renewed', 'subscription.past_due', 'subscription.canceled', 'subscription.ended', 'plan.window_exhausted'];
const OPERATOR_EVENTS = ['upstream.circuit_opened', 'upstream.circuit_closed', 'webhook.endpoint_disabled'];

function CreateEndpoint({ city, onCreated }: { city: string; onCreated: () => void }) {
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['*']);
  const [created, setCreated] = useState<(Endpoint & { secret: string }) | null>(null);
  const act = useAction();
  const choices = ['*', ...CITY_EVENTS, ...(city === '*' ? OPERATOR_EVENTS : [])];
  const toggle = (e: string) => setEvents(events.includes(e) ? events.filter((x) => x !== e) : [...events.filter((x) => x !== '*'), e].filter((x) => e !== '*' || x === '*'));
  return (
    <form
      onSubmit={async (ev) => {
        ev.preventDefault();
        setCreated(null);
        const r = await act.run(() => post<Endpoint & { secret: string }>('webhooks/create', { city_id: city, url: url.trim(), events: events.length ? events : ['*'] }));
        if (r) {
          setCreated(r);
          setUrl('');
          onCreated();
        }
      }}
    >
      <fieldset role="group">
        <input aria-label="Endpoint URL" type="url" placeholder="https://backend.example.com/hooks/citygate" required value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
        <button type="submit" aria-busy={act.busy} disabled={act.busy}>Add endpoint</button>
      </fieldset>
      <fieldset class="event-choices">
        <legend><small>Events</small></legend>
        {choices.map((e) => (
          <label key={e}>
            <input type="checkbox" checked={events.includes(e)} onChange={() => toggle(e)} /> {e === '*' ? 'all events' : e}
          </label>
        ))}
      </fieldset>
      <ErrorBox error={act.error} />
      {created && <OneTimeSecret title={`Signing secret of ${created.url}`} value={created.secret} note="Shown once: verify each delivery with it (docs/webhooks.md). citygate keeps it sealed." />}
    </form>
  );
}

function Deliveries({ endpoint }: { endpoint: Endpoint }) {
  const list = useLoad(() => get<{ items: Delivery[] }>('webhooks/deliveries', { endpoint_id: endpoint.endpoint_id, limit: 25 }), [endpoint.endpoint_id]);
  const act = useAction();
  const [open, setOpen] = useState<string | null>(null);
  return (
    <section class="deliveries" aria-label={`Deliveries to ${endpoint.url}`}>
      <header class="page-head">
        <h2>Recent deliveries</h2>
        <div class="page-actions">
          <button type="button" class="secondary outline" onClick={() => list.reload()}>Refresh</button>
        </div>
      </header>
      <ErrorBox error={act.error} />
      <Show load={list}>
        {(d) =>
          d.items.length === 0 ? (
            <Empty>Nothing sent yet. “Send test” queues a webhook.test event.</Empty>
          ) : (
            <div class="table-wrap">
              <table class="striped">
                <thead><tr><th>Event</th><th>User</th><th>Status</th><th>Attempts</th><th>Created</th><th /></tr></thead>
                <tbody>
                  {d.items.map((m) => (
                    <>
                      <tr key={m.event_id} data-event={m.event_id}>
                        <td><strong>{m.type}</strong><br /><code>{m.event_id}</code></td>
                        <td>{m.user_id ?? '—'}</td>
                        <td><Badge status={m.status} />{m.last_status !== null && <small> HTTP {m.last_status}</small>}{m.next_attempt_at && <small><br />next {when(m.next_attempt_at)}</small>}</td>
                        <td>
                          <button type="button" class="secondary outline" aria-expanded={open === m.event_id} onClick={() => setOpen(open === m.event_id ? null : m.event_id)}>{m.attempts} attempt{m.attempts === 1 ? '' : 's'}</button>
                        </td>
                        <td>{when(m.created_at)}</td>
                        <td>
                          <button type="button" class="secondary outline" disabled={act.busy} onClick={() => act.run(async () => (await post('webhooks/redeliver', { endpoint_id: endpoint.endpoint_id, event_id: m.event_id }), list.reload()))}>Redeliver</button>
                        </td>
                      </tr>
                      {open === m.event_id && (
                        <tr class="sub">
                          <td colSpan={6}>
                            <pre class="payload">{m.payload}</pre>
                            <table>
                              <thead><tr><th>When</th><th>Result</th><th>Latency</th><th>Answer (first bytes)</th></tr></thead>
                              <tbody>
                                {m.attempt_log.map((a, i) => (
                                  <tr key={i}>
                                    <td>{when(a.created_at)}</td>
                                    <td>{a.status !== null ? <Badge status={a.status < 300 ? 'delivered' : 'failed'} /> : null} {a.status ?? a.error}</td>
                                    <td>{ms(a.latency_ms)}</td>
                                    <td><code>{a.response ?? ''}</code></td>
                                  </tr>
                                ))}
                              </tbody>
                            </table>
                          </td>
                        </tr>
                      )}
                    </>
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

export function Webhooks({ params }: { params: URLSearchParams }) {
  const who = useWho();
  const cities = useCities();
  const city = params.get('city') || (who.kind === 'bureau' ? who.city?.city_id : cities.data?.[0]?.city_id) || '';
  const endpoints = useLoad(() => (city ? get<{ items: Endpoint[] }>('webhooks/list', { city_id: city }) : Promise.resolve({ items: [] })), [city]);
  const [selected, setSelected] = useState<string | null>(params.get('endpoint'));
  const act = useAction();
  const [sent, setSent] = useState<string | null>(null);
  const options = [...(cities.data ?? []).map((c) => c.city_id), ...(who.kind === 'admin' ? ['*'] : [])];
  return (
    <>
      <PageHead title="Webhooks">
        {options.length > 1 && (
          <select aria-label="City" value={city} onChange={(e) => go('webhooks', { city: e.currentTarget.value })}>
            {options.map((c) => <option key={c} value={c}>{c === '*' ? 'operator (*)' : c}</option>)}
          </select>
        )}
      </PageHead>
      <p><small>Signed events (Standard Webhooks) to {city === '*' ? 'the operator’s endpoints: upstream circuits, disabled endpoints, and any city’s events' : <>the backend of <strong>{city}</strong></>}: at least once, in order per user and event type, retried with backoff.</small></p>
      {city && <CreateEndpoint city={city} onCreated={endpoints.reload} />}
      <ErrorBox error={act.error} />
      {sent && <p role="status"><small>Test event <code>{sent}</code> queued.</small></p>}
      <Show load={endpoints}>
        {(d) =>
          d.items.length === 0 ? (
            <Empty>No endpoints for this city yet.</Empty>
          ) : (
            <div class="table-wrap">
              <table>
                <thead><tr><th>Endpoint</th><th>Events</th><th>Status</th><th>Actions</th></tr></thead>
                <tbody>
                  {d.items.map((e) => (
                    <tr key={e.endpoint_id} data-endpoint={e.endpoint_id} class={selected === e.endpoint_id ? 'selected' : ''}>
                      <td><code>{e.url}</code><br /><small>{e.endpoint_id} · {when(e.created_at)}</small></td>
                      <td><small>{e.events.join(', ')}</small></td>
                      <td><Badge status={e.enabled ? 'active' : 'disabled'} />{e.disabled_reason && <small><br />{e.disabled_reason}</small>}{e.failing_since && <small><br />failing since {when(e.failing_since)}</small>}</td>
                      <td>
                        <div class="actions-row">
                          <button type="button" class="secondary outline" aria-pressed={selected === e.endpoint_id} onClick={() => setSelected(selected === e.endpoint_id ? null : e.endpoint_id)}>Deliveries</button>
                          <button type="button" class="secondary outline" disabled={act.busy} onClick={() => act.run(async () => setSent((await post<{ event_id: string }>('webhooks/test', { endpoint_id: e.endpoint_id })).event_id))}>Send test</button>
                          <button type="button" class="secondary outline" disabled={act.busy} onClick={() => act.run(async () => (await post('webhooks/update', { endpoint_id: e.endpoint_id, enabled: !e.enabled }), endpoints.reload()))}>{e.enabled ? 'Disable' : 'Enable'}</button>
                          <ConfirmButton label="Remove" class="danger outline" question={`Remove the endpoint ${e.url}? Its undelivered events are dropped.`} onConfirm={() => act.run(async () => (await post('webhooks/remove', { endpoint_id: e.endpoint_id }), setSelected(null), endpoints.reload()))} />
                        </div>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Show>
      {selected && endpoints.data?.items.find((e) => e.endpoint_id === selected) && <Deliveries endpoint={endpoints.data.items.find((e) => e.endpoint_id === selected)!} />}
    </>
  );
}

/** The city's alert thresholds (Cities page): balance.low below this many credits. */
export function CityAlerts({ city }: { city: string }) {
  const current = useLoad(() => get<{ city_id: string; balance_low: number | null }>('webhooks/alerts', { city_id: city }), [city]);
  const [value, setValue] = useState<string | null>(null);
  const [done, setDone] = useState(false);
  const act = useAction();
  const shown = value ?? (current.data?.balance_low == null ? '' : String(current.data.balance_low));
  return (
    <form
      class="alerts"
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(false);
        const v = shown.trim();
        const r = await act.run(() => post('webhooks/alerts/update', { city_id: city, balance_low: v === '' ? null : Number(v) }));
        if (r) {
          setDone(true);
          current.reload();
        }
      }}
    >
      <label>
        balance.low below (credits; empty: no alert)
        <fieldset role="group">
          <input aria-label={`balance.low threshold of ${city}`} inputMode="numeric" placeholder="e.g. 1000000 ($1)" value={shown} onInput={(e) => (setValue(e.currentTarget.value), setDone(false))} />
          <button type="submit" aria-busy={act.busy} disabled={act.busy}>Save alert</button>
        </fieldset>
      </label>
      <small>Sent once each time a user’s balance goes below it, to the city’s endpoints subscribed to balance.low. <a href={`#/webhooks?city=${encodeURIComponent(city)}`}>Webhooks</a></small>
      {done && <p role="status"><small>Saved.</small></p>}
      <ErrorBox error={act.error} />
    </form>
  );
}
