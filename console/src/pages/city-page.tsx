// A city's users' page (/u/<city_id>/): on or off, its logo URL and accent colour, read with
// cities/get and saved with cities/update { user_page } (admin; a bureau sees them and the link).
// The API judges the values (https logo, hex colour); its message is shown as it says it.
import { useEffect, useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { ErrorBox, Loading, useAction } from '../ui.tsx';

interface UserPage {
  enabled: boolean;
  logo_url: string | null;
  accent_color: string | null;
}

export function CityPage({ city, readOnly }: { city: string; readOnly: boolean }) {
  const [form, setForm] = useState<{ enabled: boolean; logo: string; accent: string } | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const load = useAction();
  const save = useAction();
  const fill = (p: UserPage) => setForm({ enabled: p.enabled, logo: p.logo_url ?? '', accent: p.accent_color ?? '' });
  useEffect(() => {
    load.run(async () => fill((await get<{ user_page: UserPage }>('cities/get', { city_id: city })).user_page));
  }, [city]);
  if (load.error) return <ErrorBox error={load.error} />;
  if (!form) return <Loading what="Reading the users' page settings" />;
  const id = (k: string) => `${city}-page-${k}`;
  const url = `/u/${encodeURIComponent(city)}/`;
  return (
    <form
      class="limits"
      aria-label={`Users' page of ${city}`}
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(null);
        const r = await save.run(() =>
          post<{ user_page: UserPage }>('cities/update', {
            city_id: city,
            user_page: { enabled: form.enabled, logo_url: form.logo.trim() || null, accent_color: form.accent.trim() || null },
          }),
        );
        if (r) {
          fill(r.user_page);
          setDone('Saved: the page shows it on its next load.');
        }
      }}
    >
      <h3>Users' page</h3>
      <p>
        <small>
          Where this city's users sign in, see their balance and usage, buy credits and make API keys:{' '}
          <a href={url} target="_blank" rel="noopener noreferrer">
            {url}
          </a>
        </small>
      </p>
      <label class="inline-check">
        <input type="checkbox" role="switch" checked={form.enabled} disabled={readOnly} onChange={(e) => setForm({ ...form, enabled: e.currentTarget.checked })} />
        The page is on
      </label>
      <div class="form-grid">
        <div>
          <label for={id('logo')}>Logo URL (https)</label>
          <input id={id('logo')} type="url" placeholder="none" autocomplete="off" readOnly={readOnly} value={form.logo} onInput={(e) => setForm({ ...form, logo: e.currentTarget.value })} />
        </div>
        <div>
          <label for={id('accent')}>Accent colour</label>
          <fieldset role="group">
            <input id={id('accent')} placeholder="#2563eb (default)" autocomplete="off" readOnly={readOnly} value={form.accent} onInput={(e) => setForm({ ...form, accent: e.currentTarget.value })} />
            <input type="color" aria-label="Pick the accent colour" disabled={readOnly} value={/^#[0-9a-f]{6}$/i.test(form.accent) ? form.accent : '#2563eb'} onInput={(e) => setForm({ ...form, accent: e.currentTarget.value })} />
          </fieldset>
        </div>
      </div>
      <ErrorBox error={save.error} />
      {done && <p class="ok" role="status">{done}</p>}
      {!readOnly && (
        <button type="submit" class="auto" aria-busy={save.busy} disabled={save.busy}>
          Save the page
        </button>
      )}
    </form>
  );
}
