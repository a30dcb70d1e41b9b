// Bureaus: credentials for a city's trusted backend. The token is shown once at creation.
import { useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { useCities } from '../cities.ts';
import { Badge, ConfirmButton, Empty, ErrorBox, OneTimeSecret, PageHead, Show, useAction, useLoad, when } from '../ui.tsx';

interface Bureau { bureau_id: string; city_id: string; name: string; status: string; created_at: string; revoked_at: string | null }

export function Bureaus() {
  const cities = useCities();
  const list = useLoad(() => get<{ items: Bureau[] }>('bureaus/list'), []);
  const [city, setCity] = useState('');
  const [name, setName] = useState('');
  const [created, setCreated] = useState<(Bureau & { bureau_token: string }) | null>(null);
  const act = useAction();
  const cityId = city || cities.data?.[0]?.city_id || '';
  return (
    <>
      <PageHead title="Bureaus" />
      <p><small>A bureau token lets a city’s backend issue user tokens, adjust credits and read usage of its own city only. It can also sign in here for that city’s view.</small></p>
      {cities.data?.length === 0 ? (
        <Empty>Create a city first: a bureau belongs to one city.</Empty>
      ) : (
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setCreated(null);
            const r = await act.run(() => post<Bureau & { bureau_token: string }>('bureaus/create', { city_id: cityId, name }));
            if (r) {
              setCreated(r);
              setName('');
              list.reload();
            }
          }}
        >
          <fieldset role="group">
            <select aria-label="City" value={cityId} onChange={(e) => setCity(e.currentTarget.value)}>
              {(cities.data ?? []).map((c) => <option key={c.city_id} value={c.city_id}>{c.city_id}</option>)}
            </select>
            <input aria-label="Bureau name" placeholder="name, e.g. backend" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
            <button type="submit" aria-busy={act.busy} disabled={act.busy}>Create bureau</button>
          </fieldset>
        </form>
      )}
      <ErrorBox error={act.error} />
      {created && <OneTimeSecret title={`Bureau token for ${created.city_id} (${created.name})`} value={created.bureau_token} />}
      <Show load={list}>
        {(d) =>
          d.items.length === 0 ? (
            <Empty>No bureaus yet. Create one for a city whose backend should call citygate.</Empty>
          ) : (
            <div class="table-wrap">
              <table class="striped">
                <thead><tr><th>Bureau</th><th>City</th><th>Status</th><th>Created</th><th /></tr></thead>
                <tbody>
                  {d.items.map((b) => (
                    <tr key={b.bureau_id}>
                      <td>{b.name}<br /><code>{b.bureau_id}</code></td>
                      <td>{b.city_id}</td>
                      <td><Badge status={b.status} />{b.revoked_at && <small> {when(b.revoked_at)}</small>}</td>
                      <td>{when(b.created_at)}</td>
                      <td>
                        {b.status === 'active' && (
                          <ConfirmButton label="Revoke" class="danger outline" question={`Revoke ${b.name}? Its token stops working on the next request.`} onConfirm={() => act.run(async () => (await post('bureaus/revoke', { bureau_id: b.bureau_id }), list.reload()))} />
                        )}
                      </td>
                    </tr>
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
