// A city's models and prices (cities/get, cities/update): the allow-list of models its users
// may call (all, or the ticked ones), the multiplier over the base prices, and per-model price
// fields that replace base × multiplier. The admin edits; a bureau reads its own city's.
import { useEffect, useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { ErrorBox, Loading, num, useAction, when } from '../ui.tsx';
import { PRICE_FIELDS, type AdminModel } from './model-form.tsx';

type Prices = Record<string, number>;
interface Settings { models: string[] | null; price_multiplier: number; prices: Record<string, Prices>; updated_at: string }

export function CityPrices({ city, readOnly }: { city: string; readOnly: boolean }) {
  const [saved, setSaved] = useState<Settings | null>(null);
  const [models, setModels] = useState<{ id: string; prices: Prices | null }[]>([]);
  const [all, setAll] = useState(true);
  const [picked, setPicked] = useState<string[]>([]);
  const [mult, setMult] = useState('1');
  const [overrides, setOverrides] = useState<Record<string, Prices>>({});
  const [draft, setDraft] = useState({ model: '', field: 'per_request', value: '' });
  const [done, setDone] = useState<string | null>(null);
  const load = useAction();
  const save = useAction();

  const show = (s: Settings) => {
    setSaved(s);
    setAll(s.models === null);
    setPicked(s.models ?? []);
    setMult(String(s.price_multiplier));
    setOverrides(s.prices);
  };

  useEffect(() => {
    load.run(async () => {
      show(await get<Settings>('cities/get', { city_id: city }));
      // the admin picks from every model; a bureau sees its city's catalog
      if (readOnly) setModels((await get<{ items: { id: string; price: Prices | null }[] }>('ai/models')).items.map((m) => ({ id: m.id, prices: m.price })));
      else setModels((await get<{ items: AdminModel[] }>('ai/models/list')).items.filter((m) => m.enabled).map((m) => ({ id: m.model_id, prices: m.prices })));
    });
  }, [city]);

  if (load.error) return <ErrorBox error={load.error} />;
  if (!saved) return <Loading what="Reading the city's models and prices" />;
  const id = (k: string) => `${city}-${k}`;
  const k = Number(mult) || 1;

  return (
    <form
      class="limits"
      aria-label={`Models and prices of ${city}`}
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(null);
        const removed = Object.fromEntries(Object.keys(saved.prices).filter((m) => !overrides[m]).map((m) => [m, null]));
        const s = await save.run(() =>
          post<Settings>('cities/update', {
            city_id: city,
            models: all ? null : picked,
            price_multiplier: /^\d+(\.\d+)?$/.test(mult.trim()) ? Number(mult) : mult,
            prices: { ...removed, ...overrides },
          }),
        );
        if (s) {
          show(s);
          setDone(`Saved at ${when(s.updated_at)}: every process charges these within a few seconds.`);
        }
      }}
    >
      <h3>Models</h3>
      <label>
        <input type="checkbox" role="switch" checked={all} disabled={readOnly} onChange={(e) => setAll(e.currentTarget.checked)} />
        Every model (no allow-list)
      </label>
      {!all && (
        <div class="check-grid" data-testid="allow-list">
          {models.map((m) => (
            <label key={m.id} class="inline-check">
              <input type="checkbox" disabled={readOnly} checked={picked.includes(m.id)} onChange={(e) => setPicked(e.currentTarget.checked ? [...picked, m.id] : picked.filter((x) => x !== m.id))} /> {m.id}
            </label>
          ))}
        </div>
      )}
      <p><small>Another model is <code>404 model_not_found</code> for this city's users, on every API.</small></p>

      <h3>Prices</h3>
      <div class="form-grid">
        <div>
          <label for={id('multiplier')}>Price multiplier</label>
          <input id={id('multiplier')} inputMode="decimal" value={mult} disabled={readOnly} onInput={(e) => setMult(e.currentTarget.value)} />
          <small>Base price × this: 1.25 charges 25 % over the base price (the margin).</small>
        </div>
      </div>
      <p><strong>Per-model prices</strong> <small class="muted">(these fields replace base × multiplier for one model)</small></p>
      {Object.keys(overrides).length === 0 ? (
        <p><small class="muted">None: every model costs base × {num(k)}.</small></p>
      ) : (
        <table data-testid="overrides">
          <thead><tr><th>Model</th><th>Price fields (credits)</th><th /></tr></thead>
          <tbody>
            {Object.entries(overrides).map(([m, p]) => (
              <tr key={m}>
                <td><code>{m}</code></td>
                <td>{Object.entries(p).map(([f, v]) => <div key={f}><small>{num(v)} {f}</small></div>)}</td>
                <td>{!readOnly && <button type="button" class="secondary outline small" onClick={() => setOverrides(Object.fromEntries(Object.entries(overrides).filter(([x]) => x !== m)))}>Remove</button>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {!readOnly && (
        <fieldset role="group" aria-label="Add a per-model price">
          <select aria-label="Model" value={draft.model} onChange={(e) => setDraft({ ...draft, model: e.currentTarget.value })}>
            <option value="">model…</option>
            {models.map((m) => <option key={m.id} value={m.id}>{m.id}</option>)}
          </select>
          <select aria-label="Price field" value={draft.field} onChange={(e) => setDraft({ ...draft, field: e.currentTarget.value })}>
            {PRICE_FIELDS.map((f) => <option key={f.key} value={f.key}>{f.label}</option>)}
          </select>
          <input aria-label="Credits" inputMode="decimal" placeholder="credits" value={draft.value} onInput={(e) => setDraft({ ...draft, value: e.currentTarget.value })} />
          <button
            type="button"
            class="secondary"
            disabled={!draft.model || draft.value.trim() === ''}
            onClick={() => {
              setOverrides({ ...overrides, [draft.model]: { ...overrides[draft.model], [draft.field]: Number(draft.value) } });
              setDraft({ ...draft, value: '' });
            }}
          >
            Set
          </button>
        </fieldset>
      )}
      <details>
        <summary>What the city's users pay</summary>
        <table data-testid="city-price-list">
          <thead><tr><th>Model</th>{!readOnly && <th>Base</th>}<th>This city</th></tr></thead>
          <tbody>
            {models.filter((m) => all || picked.includes(m.id)).map((m) => {
              // a bureau reads its city's prices as they are; the admin sees base × multiplier + the city's fields
              const city: Prices = readOnly ? { ...m.prices } : Object.fromEntries(Object.entries(m.prices ?? {}).map(([f, v]) => [f, v * k]));
              if (!readOnly) Object.assign(city, overrides[m.id] ?? {});
              return (
                <tr key={m.id}>
                  <td><code>{m.id}</code></td>
                  {!readOnly && <td>{m.prices ? Object.entries(m.prices).map(([f, v]) => <div key={f}><small>{num(v)} {f}</small></div>) : <small>free</small>}</td>}
                  <td>{Object.keys(city).length ? Object.entries(city).map(([f, v]) => <div key={f}><small>{num(v)} {f}</small></div>) : <small>free</small>}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </details>
      {!readOnly && (
        <div class="actions-row">
          <button type="submit" aria-busy={save.busy} disabled={save.busy}>Save models and prices</button>
        </div>
      )}
      <ErrorBox error={save.error} />
      {done && <p class="ok" role="status">{done}</p>}
    </form>
  );
}
