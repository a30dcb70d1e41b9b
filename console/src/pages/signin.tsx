import { useState } from 'preact/hooks';
import { whoAmI, type Who } from '../api.ts';
import { ErrorBox } from '../ui.tsx';

export function SignIn({ onSignedIn, error, notice }: { onSignedIn: (w: Who, key: string) => void; error: unknown; notice: string | null }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(error);
  return (
    <main class="container signin">
      <article>
        <header>
          <h1>citygate console</h1>
          <p>Sign in with the admin key, or with a bureau token to see one city.</p>
        </header>
        {notice && <p class="notice" role="status">{notice}</p>}
        <ErrorBox error={err} />
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setBusy(true);
            setErr(null);
            try {
              const k = key.trim();
              onSignedIn(await whoAmI(k), k);
            } catch (x) {
              setErr(x);
            } finally {
              setBusy(false);
            }
          }}
        >
          <label>
            Admin key or bureau token
            <input
              type="password"
              name="key"
              autocomplete="off"
              required
              placeholder="cg_admin_… or cg_bureau_…"
              value={key}
              onInput={(e) => setKey(e.currentTarget.value)}
            />
          </label>
          <button type="submit" aria-busy={busy} disabled={busy}>
            Sign in
          </button>
          <small>
            The key stays in this tab (sessionStorage) and goes only to this gateway. Read the admin key with <code>npx citygate admin-key</code>.
          </small>
        </form>
      </article>
    </main>
  );
}
