// Users of a city: the directory (accounts/users) with balances, and one user's profile,
// balance, ledger and a credit adjustment carrying an idempotency key (a double click, or a
// retry after a lost answer, changes the balance once).
import { useState } from 'preact/hooks';
import { get, post, type Page } from '../api.ts';
import { useCities } from '../cities.ts';
import { go, href } from '../router.ts';
import { Badge, Empty, ErrorBox, Loading, num, PageHead, Show, useAction, useLoad, usd, when } from '../ui.tsx';
import { Meters, type SubscriptionView } from '../plan-meters.tsx';

interface UserRow { city_id: string; user_id: string; name: string | null; email: string | null; email_verified: boolean; created_via: string; created_at: string | null; last_login_at: string | null }
interface BalanceRow { city_id: string; user_id: string; credits: number; usd: number }
interface LedgerRow { entry_id: string; credits: number; balance_after: number; kind: string; reason: string | null; model: string | null; request_id: string | null; actor: string; created_at: string }

const newKey = () => `console:${crypto.randomUUID()}`;

function Adjust({ city, user, onDone }: { city: string; user: string; onDone: () => void }) {
  const [credits, setCredits] = useState('');
  const [reason, setReason] = useState('');
  // One key per intended adjustment: it changes when the form does, not when an answer comes,
  // so a second click or Enter (however late) sends the same key and changes nothing twice.
  const [key, setKey] = useState(newKey);
  const [result, setResult] = useState<string | null>(null);
  const act = useAction();
  return (
    <form
      class="adjust"
      onSubmit={async (e) => {
        e.preventDefault();
        const n = Number(credits);
        const r = await act.run(() =>
          post<{ credits: number; replayed: boolean }>('balance/adjust', { city_id: city, user_id: user, credits: n, reason: reason.trim(), idempotency_key: key }),
        );
        if (r) {
          setResult(r.replayed ? `Already applied: this exact form was sent before (change it to adjust again). Balance ${num(r.credits)} credits.` : `${n > 0 ? 'Added' : 'Took'} ${num(Math.abs(n))} credits: balance ${num(r.credits)}.`);
          onDone();
        }
      }}
    >
      <h3>Adjust credits</h3>
      <div class="grid">
        <label>
          Credits (negative to take)
          <input name="credits" type="number" step="1" required value={credits} onInput={(e) => (setCredits(e.currentTarget.value), setKey(newKey()), setResult(null))} placeholder="1000000 = $1" />
        </label>
        <label>
          Reason
          <input name="reason" required maxLength={500} value={reason} onInput={(e) => (setReason(e.currentTarget.value), setKey(newKey()), setResult(null))} placeholder="e.g. support refund" />
        </label>
      </div>
      <button type="submit" aria-busy={act.busy}>Apply adjustment</button>
      <small class="muted"> Idempotency key: <code>{key.slice(0, 16)}…</code></small>
      <ErrorBox error={act.error} />
      {result && <p role="status" class="ok">{result}</p>}
    </form>
  );
}

/** The user's plan, if any: status, period and each window as a meter. */
function PlanCard({ city, user }: { city: string; user: string }) {
  // No plans service mounted (GATEWAY_SERVICES): no card, not an error.
  const sub = useLoad(() => get<{ subscription: SubscriptionView | null }>('plans/subscription', { city_id: city, user_id: user }).catch(() => ({ subscription: null })), [city, user]);
  return (
    <Show load={sub}>
      {(d) =>
        d.subscription ? (
          <article class="user-plan" aria-label="Plan">
            <header>
              Plan <strong>{d.subscription.plan.name}</strong> <Badge status={d.subscription.status} /> <small>via {d.subscription.provider}{d.subscription.cancel_at_period_end ? ' · cancels at the period’s end' : ''} · until {when(d.subscription.period_end)}</small>
            </header>
            <Meters windows={d.subscription.windows} />
          </article>
        ) : (
          <p><small>No plan: calls draw on prepaid credits.</small></p>
        )
      }
    </Show>
  );
}

function UserDetail({ city, user, profile }: { city: string; user: string; profile?: UserRow }) {
  const bal = useLoad(() => get<BalanceRow & { exists: boolean }>('balance/get', { city_id: city, user_id: user }), [city, user]);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const ledger = useLoad(() => get<Page<LedgerRow>>('balance/ledger', { city_id: city, user_id: user, limit: 20, cursor }), [city, user, cursor]);
  const refresh = () => (bal.reload(), cursor ? setCursor(undefined) : ledger.reload());
  return (
    <section class="user-detail" aria-label={`User ${user}`}>
      <h2>
        {user} <small class="muted">in {city}</small>
      </h2>
      <div class="cards">
        <div class="card">
          <span>Balance</span>
          <Show load={bal}>{(b) => <><strong data-testid="balance">{num(b.credits)}</strong><small>credits · {usd(b.credits)}</small></>}</Show>
        </div>
        <div class="card">
          <span>Profile</span>
          {profile ? (
            <small>
              {profile.name ?? '(no name)'} · {profile.email ?? 'no email'}
              <br />
              via {profile.created_via}, since {when(profile.created_at)}
              <br />
              last login {when(profile.last_login_at)}
            </small>
          ) : (
            <small>Not in the city’s user directory (no login or token yet).</small>
          )}
        </div>
      </div>
      <PlanCard city={city} user={user} />
      <Adjust city={city} user={user} onDone={refresh} />
      <h3>Ledger</h3>
      <Show load={ledger}>
        {(p) =>
          p.items.length === 0 ? (
            <Empty>No ledger entries yet: credits move when you adjust them, when the user pays, or when a priced call is charged.</Empty>
          ) : (
            <>
              <div class="table-wrap">
                <table class="striped" data-testid="ledger">
                  <thead>
                    <tr><th>When</th><th>Kind</th><th class="num">Credits</th><th class="num">Balance after</th><th>Reason / model</th><th>By</th></tr>
                  </thead>
                  <tbody>
                    {p.items.map((r) => (
                      <tr key={r.entry_id}>
                        <td>{when(r.created_at)}</td>
                        <td>{r.kind}</td>
                        <td class={`num ${r.credits < 0 ? 'bad' : 'good'}`}>{r.credits > 0 ? '+' : ''}{num(r.credits)}</td>
                        <td class="num">{num(r.balance_after)}</td>
                        <td>{r.reason ?? r.model ?? ''}</td>
                        <td>{r.actor}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <div class="pager">
                {cursor && <button type="button" class="secondary outline" onClick={() => setCursor(undefined)}>Newest</button>}
                {p.next_cursor && <button type="button" class="secondary outline" onClick={() => setCursor(p.next_cursor!)}>Older</button>}
              </div>
            </>
          )
        }
      </Show>
    </section>
  );
}

export function Users({ params }: { params: URLSearchParams }) {
  const cities = useCities();
  const city = params.get('city') ?? cities.data?.[0]?.city_id ?? '';
  const user = params.get('user') ?? '';
  const [open, setOpen] = useState('');
  const users = useLoad(async () => {
    if (!city) return null;
    const [dir, bals] = await Promise.all([
      get<Page<UserRow>>('accounts/users', { city_id: city, limit: 200 }).catch((e) => ({ error: e as Error })),
      get<Page<BalanceRow>>('balance/list', { city_id: city, limit: 200 }),
    ]);
    return { dir, bals };
  }, [city]);

  if (cities.error) return <ErrorBox error={cities.error} />;
  if (!cities.data) return <Loading />;
  if (cities.data.length === 0) return <Empty>No cities yet: <a href={href('cities')}>create a city</a> first.</Empty>;

  return (
    <>
      <PageHead title="Users">
        <select aria-label="City" value={city} onChange={(e) => go('users', { city: e.currentTarget.value })}>
          {cities.data.map((c) => (
            <option key={c.city_id} value={c.city_id}>{c.name} ({c.city_id})</option>
          ))}
        </select>
        <form class="open-user" onSubmit={(e) => (e.preventDefault(), open.trim() && go('users', { city, user: open.trim() }))}>
          <fieldset role="group">
            <input aria-label="User id to open" placeholder="user id" value={open} onInput={(e) => setOpen(e.currentTarget.value)} />
            <button type="submit" class="secondary">Open</button>
          </fieldset>
        </form>
      </PageHead>
      <Show load={users}>
        {(d) => {
          if (!d) return null;
          const dir = 'error' in d.dir ? null : d.dir;
          const byId = new Map<string, { profile?: UserRow; credits?: number }>();
          for (const u of dir?.items ?? []) byId.set(u.user_id, { profile: u });
          for (const b of d.bals.items) byId.set(b.user_id, { ...byId.get(b.user_id), credits: b.credits });
          const rows = [...byId].sort(([a], [b]) => a.localeCompare(b));
          return (
            <>
              {'error' in d.dir && <ErrorBox error={d.dir.error} />}
              {user && <UserDetail city={city} user={user} profile={byId.get(user)?.profile} />}
              <h2>Users of {city}</h2>
              {rows.length === 0 ? (
                <Empty>No users in this city yet. Users appear when they sign in, when you issue them a token (Cities → Token…), or when credits are given to them.</Empty>
              ) : (
                <div class="table-wrap">
                  <table class="striped">
                    <thead><tr><th>User</th><th>Name / email</th><th class="num">Credits</th><th>Since</th></tr></thead>
                    <tbody>
                      {rows.map(([id, r]) => (
                        <tr key={id} aria-current={id === user ? 'true' : undefined}>
                          <td><a href={href('users', { city, user: id })}>{id}</a></td>
                          <td>{r.profile ? `${r.profile.name ?? ''} ${r.profile.email ? `<${r.profile.email}>` : ''}`.trim() || '—' : '—'}</td>
                          <td class="num">{r.credits === undefined ? '—' : num(r.credits)}</td>
                          <td>{when(r.profile?.created_at)}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              )}
            </>
          );
        }}
      </Show>
    </>
  );
}
