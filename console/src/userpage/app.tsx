// The users' page of one city (/u/<city_id>/): the city's name and branding, sign-in, then the
// user's balance and top-ups, usage, and API keys. The sign-in token lives in sessionStorage
// (one slot per city, as the console keeps its key); it never appears in a URL.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, get, post, session, setSessionSlot, setUnauthorizedHandler } from '../api.ts';
import { ErrorBox, Loading, useLoad } from '../ui.tsx';
import { BalanceSection } from './balance.tsx';
import { cityIdFromPath, takeReturnParams, textOn, type KeyView, type PageCity } from './hooks.ts';
import { KeysSection } from './keys.tsx';
import { PlansSection } from './plans.tsx';
import { SignIn, type Issued } from './signin.tsx';
import { UsageSection } from './usage.tsx';

const cityId = cityIdFromPath();
if (cityId) setSessionSlot(`citygate.user.${cityId}`);
// What the gateway sent the browser back with (OAuth, checkout): read once, gone from the address bar at once.
const back = takeReturnParams(['oauth_state', 'oauth_status', 'oauth_error', 'payment_id', 'payment_status']);

interface Me { user_id: string; name: string | null; email: string | null }

export function UserApp() {
  if (!cityId) return <main class="container up-main"><ErrorBox error={new Error('This address names no city: the users’ page is at /u/<city_id>/.')} /></main>;
  return <CityPage cityId={cityId} />;
}

/** The city's name and branding (cities/page, no credential), then the page. */
function CityPage({ cityId }: { cityId: string }) {
  const city = useLoad(() => get<PageCity>('cities/page', { city_id: cityId }, ''), [cityId]);
  const c = city.data;
  useEffect(() => {
    if (!c) return;
    document.title = `${c.name} · your account`;
    const root = document.documentElement.style;
    if (c.accent_color) {
      root.setProperty('--accent', c.accent_color);
      root.setProperty('--accent-text', textOn(c.accent_color));
    }
  }, [c]);
  if (city.error) return <main class="container up-main"><ErrorBox error={city.error} /></main>;
  if (!c) return <main class="container up-main"><Loading /></main>;
  return <Account city={c} />;
}

function Brand({ city }: { city: PageCity }) {
  // https only (checked by cities/update, and again here); the CSP allows that one origin.
  const logo = city.logo_url?.startsWith('https://') ? city.logo_url : null;
  const [broken, setBroken] = useState(false);
  return (
    <div class="up-brand">
      {logo && !broken && <img src={logo} alt="" referrerpolicy="no-referrer" width={36} height={36} onError={() => setBroken(true)} />}
      <strong data-testid="city-name">{city.name}</strong>
    </div>
  );
}

function Account({ city }: { city: PageCity }) {
  const [token, setToken] = useState<string | null>(session.key());
  const [me, setMe] = useState<Me | null>(null);
  const [notice, setNotice] = useState<unknown>(null);
  const [collecting, setCollecting] = useState(!!back.oauth_state);

  const signOut = (why?: string) => {
    session.clear();
    setToken(null);
    setMe(null);
    setNotice(why ? new Error(why) : null);
  };
  const signIn = (t: Issued) => {
    session.set(t.user_token);
    setToken(t.user_token);
  };

  useEffect(() => {
    setUnauthorizedHandler(() => signOut('Your sign-in has ended: sign in again.'));
    // Back from GitHub or Google: collect the token once with the state, then forget the state.
    if (back.oauth_state) {
      if (back.oauth_status === 'done') {
        get<Issued & { status: string }>('accounts/oauth/result', { state: back.oauth_state }, '')
          .then((r) => (r.status === 'done' ? signIn(r) : setNotice(new Error('The sign-in did not complete.'))))
          .catch(setNotice)
          .finally(() => setCollecting(false));
      } else {
        setNotice(new ApiError(400, back.oauth_error ?? 'failed', 'The sign-in did not complete at the provider. Try again.'));
        setCollecting(false);
      }
    }
  }, []);

  useEffect(() => {
    if (!token) return;
    get<Me>('accounts/me').then(setMe, (e) => e instanceof ApiError && e.status === 401 ? undefined : setNotice(e));
  }, [token]);

  if (collecting) return <Frame city={city}><Loading what="Finishing the sign-in" /></Frame>;
  if (!token) {
    return (
      <Frame city={city}>
        <SignIn city={city} notice={notice} onToken={(t) => (setNotice(null), signIn(t))} />
      </Frame>
    );
  }
  if (!me) return <Frame city={city}><ErrorBox error={notice} />{!notice && <Loading what="Signing in" />}</Frame>;
  return (
    <Frame
      city={city}
      user={
        <div class="up-user">
          <small data-testid="signed-in-as">{me.name ?? me.email ?? me.user_id}</small>
          <button type="button" class="secondary outline small" onClick={() => post('accounts/logout').catch(() => {}).finally(() => signOut())}>
            Sign out
          </button>
        </div>
      }
    >
      <PaymentNotice />
      <Sections />
    </Frame>
  );
}

function Frame({ city, user, children }: { city: PageCity; user?: preact.ComponentChildren; children: preact.ComponentChildren }) {
  return (
    <div class="up">
      <header class="up-bar">
        <Brand city={city} />
        {user}
      </header>
      <main class="up-main">{children}</main>
    </div>
  );
}

const PAYMENT_WORDS: Record<string, string> = {
  paid: 'Thank you: your payment went through and the credits are on your balance.',
  pending: 'Thank you: your payment is being confirmed; the credits appear on your balance as soon as it is.',
  cancelled: 'The checkout was cancelled; nothing was charged.',
  failed: 'The payment did not go through; nothing was charged.',
  expired: 'The checkout expired; nothing was charged.',
};

function PaymentNotice() {
  const [shown, setShown] = useState<string | null>(back.payment_status ?? null);
  if (!shown) return null;
  return (
    <p class={`notice ${shown === 'paid' ? 'good' : ''}`} role="status" data-testid="payment-notice">
      {PAYMENT_WORDS[shown] ?? PAYMENT_WORDS.pending}{' '}
      <button type="button" class="secondary outline small" onClick={() => setShown(null)}>
        Dismiss
      </button>
    </p>
  );
}

function Sections() {
  const keys = useLoad(() => post<{ items: KeyView[] }>('accounts/keys/list', {}), []);
  const keyNames: Record<string, string> = {};
  for (const k of keys.data?.items ?? []) keyNames[k.id] = k.name;
  return (
    <>
      <PlansSection />
      <BalanceSection />
      <UsageSection keyNames={keyNames} />
      <KeysSection keys={keys} />
    </>
  );
}
