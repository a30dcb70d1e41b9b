// Cities: create, pause, activate, remove, limits and budgets (admin); issue a user token
// (admin and bureau).
import { useState } from 'preact/hooks';
import { post, type City } from '../api.ts';
import { useWho } from '../app.tsx';
import { useCities } from '../cities.ts';
import { href } from '../router.ts';
import { CityLimits } from './city-limits.tsx';
import { CityPrices } from './city-prices.tsx';
import { CityPage } from './city-page.tsx';
import { CityAlerts } from './webhooks.tsx';
import { Badge, ConfirmButton, Empty, ErrorBox, OneTimeSecret, PageHead, Show, useAction, when } from '../ui.tsx';

function CreateCity({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [id, setId] = useState('');
  const act = useAction();
  return (
    <form
      class="inline-form"
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await act.run(() => post<City>('cities/create', { name, ...(id.trim() ? { city_id: id.trim() } : {}) }));
        if (ok) {
          setName('');
          setId('');
          onCreated();
        }
      }}
    >
      <fieldset role="group">
        <input aria-label="City name" placeholder="Name, e.g. My product" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <input aria-label="City id (optional)" placeholder="id (optional)" value={id} onInput={(e) => setId(e.currentTarget.value)} />
        <button type="submit" aria-busy={act.busy} disabled={act.busy}>
          Create city
        </button>
      </fieldset>
      <ErrorBox error={act.error} />
    </form>
  );
}

export function IssueToken({ city }: { city: string }) {
  const [user, setUser] = useState('');
  const [token, setToken] = useState<{ user_token: string; user_id: string; expires_at: string } | null>(null);
  const act = useAction();
  return (
    <div class="issue">
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setToken(null);
          const r = await act.run(() => post<{ user_token: string; user_id: string; expires_at: string }>('cities/tokens/apply', { city_id: city, user_id: user.trim() }));
          if (r) setToken(r);
        }}
      >
        <fieldset role="group">
          <input aria-label={`User id for a token of ${city}`} placeholder="user id, e.g. alice" required value={user} onInput={(e) => setUser(e.currentTarget.value)} />
          <button type="submit" aria-busy={act.busy} disabled={act.busy}>
            Issue user token
          </button>
        </fieldset>
      </form>
      <ErrorBox error={act.error} />
      {token && <OneTimeSecret title={`User token for ${token.user_id} (expires ${when(token.expires_at)})`} value={token.user_token} />}
    </div>
  );
}

function CityRow({ c, onChange }: { c: City; onChange: () => void }) {
  const who = useWho();
  const act = useAction();
  const [issuing, setIssuing] = useState(false);
  const [limits, setLimits] = useState(false);
  const [prices, setPrices] = useState(false);
  const [alerts, setAlerts] = useState(false);
  const [userPage, setUserPage] = useState(false);
  const admin = who.kind === 'admin';
  const change = (what: 'pause' | 'activate' | 'remove') => act.run(async () => (await post(`cities/${what}`, { city_id: c.city_id }), onChange()));
  return (
    <>
      <tr data-city={c.city_id}>
        <td>
          <strong>{c.name}</strong>
          <br />
          <code>{c.city_id}</code>
        </td>
        <td><Badge status={c.status} /></td>
        <td>{when(c.created_at)}</td>
        <td>
          <div class="actions-row">
          <a href={href('users', { city: c.city_id })} role="button" class="secondary outline">Users</a>
          <button type="button" class="secondary outline" aria-expanded={issuing} onClick={() => setIssuing(!issuing)}>
            Token…
          </button>
          {admin && (
            <button type="button" class="secondary outline" aria-expanded={limits} onClick={() => setLimits(!limits)}>
              Limits…
            </button>
          )}
          <button type="button" class="secondary outline" aria-expanded={prices} onClick={() => setPrices(!prices)}>
            Models &amp; prices…
          </button>
          <button type="button" class="secondary outline" aria-expanded={alerts} onClick={() => setAlerts(!alerts)}>
            Alerts…
          </button>
          <button type="button" class="secondary outline" aria-expanded={userPage} onClick={() => setUserPage(!userPage)}>
            Users' page…
          </button>
          {admin && c.status === 'active' && (
            <ConfirmButton label="Pause" question={`Pause ${c.name}? Its user tokens get 403 until it is activated.`} onConfirm={() => change('pause')} />
          )}
          {admin && c.status === 'paused' && (
            <button type="button" class="secondary outline" disabled={act.busy} onClick={() => change('activate')}>
              Activate
            </button>
          )}
          {admin && (
            <ConfirmButton
              label="Remove"
              class="danger outline"
              question={`Remove ${c.name} (${c.city_id})? Its tokens stop working for good and the id is never reused; its records stay.`}
              onConfirm={() => change('remove')}
            />
          )}
          </div>
        </td>
      </tr>
      {(issuing || limits || prices || alerts || userPage || act.error) && (
        <tr class="sub">
          <td colSpan={4}>
            <ErrorBox error={act.error} />
            {issuing && <IssueToken city={c.city_id} />}
            {limits && <CityLimits city={c.city_id} />}
            {prices && <CityPrices city={c.city_id} readOnly={!admin} />}
            {alerts && <CityAlerts city={c.city_id} />}
            {userPage && <CityPage city={c.city_id} readOnly={!admin} />}
          </td>
        </tr>
      )}
    </>
  );
}

export function Cities() {
  const who = useWho();
  const cities = useCities();
  return (
    <>
      <PageHead title="Cities" />
      {who.kind === 'admin' && <CreateCity onCreated={cities.reload} />}
      <Show load={cities}>
        {(items) =>
          items.length === 0 ? (
            <Empty>No cities yet. Create one above: each product that calls citygate is a city, and every user token is bound to one.</Empty>
          ) : (
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>City</th>
                    <th>Status</th>
                    <th>Created</th>
                    <th>Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {items.map((c) => (
                    <CityRow key={c.city_id} c={c} onChange={cities.reload} />
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Show>
    </>
  );
}
