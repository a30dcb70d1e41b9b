// The console's frame: sign-in, navigation by identity (the admin sees everything, a bureau
// its own city), and the page of the current route.
import { createContext } from 'preact';
import { useContext, useEffect, useState } from 'preact/hooks';
import { session, setUnauthorizedHandler, whoAmI, type Who } from './api.ts';
import { href, useRoute } from './router.ts';
import { ErrorBox, Loading } from './ui.tsx';
import { SignIn } from './pages/signin.tsx';
import { Overview } from './pages/overview.tsx';
import { Cities } from './pages/cities.tsx';
import { Users } from './pages/users.tsx';
import { Payments } from './pages/payments.tsx';
import { Usage } from './pages/usage.tsx';
import { Models } from './pages/models.tsx';
import { Env } from './pages/env.tsx';
import { Bureaus } from './pages/bureaus.tsx';
import { Playground } from './pages/playground.tsx';
import { Webhooks } from './pages/webhooks.tsx';
import { Plans } from './pages/plans.tsx';
import { Mcp } from './pages/mcp.tsx';

export const WhoContext = createContext<Who>({ kind: 'admin', city: null });
export const useWho = () => useContext(WhoContext);

interface PageDef {
  id: string;
  title: string;
  admin?: boolean;
  view: (p: { params: URLSearchParams }) => preact.JSX.Element;
}

const PAGES: PageDef[] = [
  { id: 'overview', title: 'Overview', view: Overview },
  { id: 'cities', title: 'Cities', view: Cities },
  { id: 'users', title: 'Users', view: Users },
  { id: 'payments', title: 'Payments', view: Payments },
  { id: 'plans', title: 'Plans', view: Plans },
  { id: 'usage', title: 'Usage', view: Usage },
  { id: 'models', title: 'Models', view: Models },
  { id: 'env', title: 'Env', admin: true, view: Env },
  { id: 'bureaus', title: 'Bureaus', admin: true, view: Bureaus },
  { id: 'webhooks', title: 'Webhooks', view: Webhooks },
  { id: 'mcp', title: 'Tools (MCP)', view: Mcp },
  { id: 'playground', title: 'Playground', view: Playground },
];

export function App() {
  const [who, setWho] = useState<Who | null>(null);
  const [checking, setChecking] = useState(!!session.key());
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const route = useRoute();

  const signOut = (why?: string) => {
    session.clear();
    setWho(null);
    setNotice(why ?? null);
  };

  useEffect(() => {
    setUnauthorizedHandler(() => signOut('The gateway no longer accepts this credential: sign in again.'));
    const key = session.key();
    if (!key) return;
    whoAmI(key).then(
      (w) => (setWho(w), setChecking(false)),
      (e) => (setError(e), session.clear(), setChecking(false)),
    );
  }, []);

  if (checking) return <main class="container"><Loading what="Checking the saved credential" /></main>;
  if (!who) {
    return (
      <SignIn
        notice={notice}
        error={error}
        onSignedIn={(w, key) => {
          session.set(key);
          setError(null);
          setNotice(null);
          setWho(w);
        }}
      />
    );
  }

  const pages = PAGES.filter((p) => !p.admin || who.kind === 'admin');
  const page = pages.find((p) => p.id === route.page);
  return (
    <WhoContext.Provider value={who}>
      <div class="shell">
        <aside class="side">
          <a class="brand" href={href('overview')}>
            citygate <span>console</span>
          </a>
          <nav aria-label="Pages">
            <ul>
              {pages.map((p) => (
                <li key={p.id}>
                  <a href={href(p.id)} aria-current={p.id === route.page ? 'page' : undefined}>
                    {p.title}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          <div class="whoami">
            <small data-testid="whoami">{who.kind === 'admin' ? 'Admin' : `Bureau of ${who.city?.city_id}`}</small>
            <button type="button" class="secondary outline small" onClick={() => signOut()}>
              Sign out
            </button>
          </div>
        </aside>
        <main class="content">
          {page ? <page.view key={page.id} params={route.params} /> : <ErrorBox error={new Error(`No page '${route.page}' for this credential.`)} />}
        </main>
      </div>
    </WhoContext.Provider>
  );
}
