// Signing in to the users' page with what the gateway offers: local login (where it is on),
// GitHub and Google. OAuth runs in this tab: oauth/start with return_to = this page, the
// provider, the gateway's callback, back here with ?oauth_state= (the app collects the token
// with oauth/result and removes the state from the address bar). No token is ever in a URL.
import { useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { ErrorBox, Loading, useAction, useLoad } from '../ui.tsx';
import type { PageCity, Provider } from './hooks.ts';

export interface Issued { user_token: string; user_id: string }

export function SignIn({ city, onToken, notice }: { city: PageCity; onToken: (t: Issued) => void; notice: unknown }) {
  const providers = useLoad(() => get<{ items: Provider[] }>('accounts/providers'), []);
  const act = useAction();
  const [userId, setUserId] = useState('');
  const [name, setName] = useState('');
  const items = providers.data?.items ?? [];
  const local = items.find((p) => p.type === 'local');
  const oauth = items.filter((p) => p.type === 'oauth');

  const startOAuth = (provider: string) =>
    act.run(async () => {
      const back = location.origin + location.pathname;
      const r = await post<{ url: string }>('accounts/oauth/start', { city_id: city.city_id, provider, return_to: back });
      location.assign(r.url);
    });

  return (
    <article class="signin-card">
      <header>
        <h2>Sign in</h2>
        <p>Sign in to {city.name} to see your balance, buy credits, follow your usage and make API keys.</p>
      </header>
      {city.status === 'paused' && <p class="notice" role="status">{city.name} is paused: signing in is not possible right now.</p>}
      <ErrorBox error={notice} />
      <ErrorBox error={act.error} />
      {providers.error && <ErrorBox error={providers.error} />}
      {!providers.data && !providers.error && <Loading what="Reading the ways to sign in" />}
      {oauth.length > 0 && (
        <div class="oauth-buttons">
          {oauth.map((p) => (
            <button type="button" key={p.id} class="secondary" disabled={act.busy} onClick={() => startOAuth(p.id)}>
              Continue with {p.name}
            </button>
          ))}
        </div>
      )}
      {local && (
        <form
          class="local-login"
          onSubmit={(e) => {
            e.preventDefault();
            act.run(async () => {
              const body: Record<string, string> = { city_id: city.city_id };
              if (userId.trim()) body.user_id = userId.trim();
              if (name.trim()) body.name = name.trim();
              onToken(await post<Issued>('accounts/login', body));
            });
          }}
        >
          {oauth.length > 0 && <p class="muted or">or, on this development gateway:</p>}
          <div class="form-grid">
            <div>
              <label for="login-user">User id</label>
              <input id="login-user" autocomplete="username" placeholder="empty: a new user" value={userId} onInput={(e) => setUserId(e.currentTarget.value)} />
            </div>
            <div>
              <label for="login-name">Your name (optional)</label>
              <input id="login-name" autocomplete="name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
            </div>
          </div>
          <button type="submit" aria-busy={act.busy} disabled={act.busy}>
            Sign in with local login
          </button>
          <small class="muted">Local login needs no password: it is for development gateways only.</small>
        </form>
      )}
      {providers.data && !local && oauth.length === 0 && <p class="empty">This gateway has no way to sign in yet: its operator has not set up GitHub or Google login.</p>}
    </article>
  );
}
