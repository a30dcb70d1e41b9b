// Plans of a city (issue 34): create one (price, credits per period, rolling windows, models,
// overflow), archive it, give one to a user without payment, and look up a user's subscription
// with each window as a meter. A bureau sees its own city; the admin picks one.
import { useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { useWho } from '../app.tsx';
import { useCities } from '../cities.ts';
import { Badge, ConfirmButton, Empty, ErrorBox, PageHead, Show, invalidIn, num, useAction, useLoad, when } from '../ui.tsx';
import { Meters, money, windowLabel, type Plan, type SubscriptionView } from '../plan-meters.tsx';

const blank = { name: '', interval: 'month', amount: '20.00', currency: 'usd', credits: '5000000', windows: '5h=400000, 7d=1500000', models: '', overflow: true, stripe_price_id: '', creem_product_id: '', order: '0' };

function CreatePlan({ city, onCreated }: { city: string; onCreated: () => void }) {
  const [f, setF] = useState(blank);
  const act = useAction();
  const invalid = invalidIn(act.error);
  const windows = () =>
    f.windows
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => {
        const [window, limit] = s.split('=').map((x) => x.trim());
        return { window: /^\d+$/.test(window) ? Number(window) : window, limit: Number(limit) };
      });
  return (
    <form
      class="plan-form"
      onSubmit={async (e) => {
        e.preventDefault();
        const body = {
          city_id: city,
          name: f.name,
          interval: f.interval,
          price: { amount: Math.round(Number(f.amount) * 100), currency: f.currency },
          credits: Number(f.credits),
          windows: windows(),
          models: f.models.trim() ? f.models.split(',').map((s) => s.trim()).filter(Boolean) : null,
          overflow: f.overflow,
          ...(f.stripe_price_id.trim() ? { stripe_price_id: f.stripe_price_id.trim() } : {}),
          ...(f.creem_product_id.trim() ? { creem_product_id: f.creem_product_id.trim() } : {}),
          order: Number(f.order),
        };
        if (await act.run(() => post('plans/create', body))) {
          setF(blank);
          onCreated();
        }
      }}
    >
      <div class="grid">
        <div>
          <label for="plan-name">Name</label>
          <input id="plan-name" required placeholder="Pro" value={f.name} aria-invalid={invalid('name')} onInput={(e) => setF({ ...f, name: e.currentTarget.value })} />
        </div>
        <div>
          <label for="plan-interval">Billed every</label>
          <select id="plan-interval" value={f.interval} onChange={(e) => setF({ ...f, interval: e.currentTarget.value })}>
            <option value="month">month</option>
            <option value="year">year</option>
          </select>
        </div>
        <div>
          <label for="plan-amount">Price</label>
          <input id="plan-amount" inputMode="decimal" value={f.amount} aria-invalid={invalid('price')} onInput={(e) => setF({ ...f, amount: e.currentTarget.value })} />
        </div>
        <div>
          <label for="plan-currency">Currency</label>
          <input id="plan-currency" value={f.currency} aria-invalid={invalid('price')} onInput={(e) => setF({ ...f, currency: e.currentTarget.value })} />
        </div>
      </div>
      <div class="grid">
        <div>
          <label for="plan-credits">Credits per period <small>(expire at its end)</small></label>
          <input id="plan-credits" inputMode="numeric" value={f.credits} aria-invalid={invalid('credits')} onInput={(e) => setF({ ...f, credits: e.currentTarget.value })} />
        </div>
        <div>
          <label for="plan-windows">Windows <small>(length=credits, e.g. 5h=400000, 7d=1500000)</small></label>
          <input id="plan-windows" value={f.windows} aria-invalid={invalid('windows')} onInput={(e) => setF({ ...f, windows: e.currentTarget.value })} />
        </div>
      </div>
      <div class="grid">
        <div>
          <label for="plan-models">Models <small>(comma-separated; empty: all)</small></label>
          <input id="plan-models" value={f.models} aria-invalid={invalid('models')} onInput={(e) => setF({ ...f, models: e.currentTarget.value })} />
        </div>
        <div>
          <label for="plan-stripe">Stripe price <small>(empty: created on the first subscribe)</small></label>
          <input id="plan-stripe" placeholder="price_…" value={f.stripe_price_id} aria-invalid={invalid('stripe_price_id')} onInput={(e) => setF({ ...f, stripe_price_id: e.currentTarget.value })} />
        </div>
        <div>
          <label for="plan-creem">Creem product</label>
          <input id="plan-creem" placeholder="prod_…" value={f.creem_product_id} aria-invalid={invalid('creem_product_id')} onInput={(e) => setF({ ...f, creem_product_id: e.currentTarget.value })} />
        </div>
        <div>
          <label for="plan-order">Order</label>
          <input id="plan-order" inputMode="numeric" value={f.order} onInput={(e) => setF({ ...f, order: e.currentTarget.value })} />
        </div>
      </div>
      <label>
        <input type="checkbox" role="switch" checked={f.overflow} onChange={(e) => setF({ ...f, overflow: e.currentTarget.checked })} /> Past the plan’s allowance, charge prepaid credits (else refuse with 429)
      </label>
      <button type="submit" aria-busy={act.busy} disabled={act.busy}>Create plan</button>
      <ErrorBox error={act.error} />
    </form>
  );
}

function Subscriber({ city, plans }: { city: string; plans: Plan[] }) {
  const [user, setUser] = useState('');
  const [plan, setPlan] = useState('');
  const [sub, setSub] = useState<SubscriptionView | null | undefined>(undefined);
  const act = useAction();
  const look = async () => setSub((await act.run(() => get<{ subscription: SubscriptionView | null }>('plans/subscription', { city_id: city, user_id: user.trim() })))?.subscription);
  return (
    <section>
      <h2>A user’s plan</h2>
      <form onSubmit={async (e) => (e.preventDefault(), await look())}>
        <fieldset role="group">
          <input aria-label="User id" placeholder="user id" required value={user} onInput={(e) => setUser(e.currentTarget.value)} />
          <button type="submit" class="secondary" aria-busy={act.busy}>Look up</button>
        </fieldset>
        <fieldset role="group">
          <select aria-label="Plan to give" value={plan || plans[0]?.id} onChange={(e) => setPlan(e.currentTarget.value)}>
            {plans.filter((p) => p.status === 'active').map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
          </select>
          <button type="button" class="outline" disabled={!user.trim() || plans.length === 0} onClick={async () => (await act.run(() => post('plans/assign', { city_id: city, user_id: user.trim(), plan_id: plan || plans[0]?.id })), await look())}>
            Give without payment (one period)
          </button>
        </fieldset>
      </form>
      <ErrorBox error={act.error} />
      {sub === null && <Empty>No plan: this user’s calls draw on prepaid credits.</Empty>}
      {sub && (
        <article>
          <header>
            <strong>{sub.plan.name}</strong> <Badge status={sub.status} /> {sub.cancel_at_period_end && <small>cancels at the period’s end</small>} <small>via {sub.provider}</small>
          </header>
          <p><small>Period {when(sub.period_start)} → {when(sub.period_end)}{sub.serving ? '' : ' · not serving'}</small></p>
          <Meters windows={sub.windows} />
        </article>
      )}
    </section>
  );
}

export function Plans() {
  const who = useWho();
  const cities = useCities();
  const [picked, setPicked] = useState('');
  const city = who.kind === 'bureau' ? who.city?.city_id ?? '' : picked || cities.data?.[0]?.city_id || '';
  const list = useLoad(() => (city ? get<{ items: Plan[] }>('plans/list', { city_id: city, include_archived: 'true' }) : Promise.resolve({ items: [] as Plan[] })), [city]);
  const act = useAction();
  return (
    <>
      <PageHead title="Plans">
        {who.kind === 'admin' && (
          <select aria-label="City" value={city} onChange={(e) => setPicked(e.currentTarget.value)}>
            {(cities.data ?? []).map((c) => <option key={c.city_id} value={c.city_id}>{c.city_id}</option>)}
          </select>
        )}
      </PageHead>
      <p><small>A plan is a subscription paid through Stripe or Creem: credits per period, capped in any rolling window, then prepaid credits if it allows overflow. See docs/money.md, Plans and subscriptions.</small></p>
      {!city ? (
        <Empty>Create a city first: a plan belongs to one city.</Empty>
      ) : (
        <>
          <details>
            <summary role="button" class="outline">New plan</summary>
            <CreatePlan city={city} onCreated={list.reload} />
          </details>
          <ErrorBox error={act.error} />
          <Show load={list}>
            {(d) => (
              <>
                {d.items.length === 0 ? (
                  <Empty>No plans in {city} yet.</Empty>
                ) : (
                  <div class="table-wrap">
                    <table class="striped">
                      <thead><tr><th>Plan</th><th>Price</th><th>Credits / period</th><th>Windows</th><th>Models</th><th>Overflow</th><th>Status</th><th /></tr></thead>
                      <tbody>
                        {d.items.map((p) => (
                          <tr key={p.id}>
                            <td>{p.name}<br /><code>{p.id}</code></td>
                            <td>{money(p.price)} / {p.interval}</td>
                            <td>{num(p.credits)}</td>
                            <td>{p.windows.length ? p.windows.map((w) => `${num(w.limit)} per ${windowLabel(w.window)}`).join(', ') : '—'}</td>
                            <td>{p.models ? p.models.join(', ') : 'all'}</td>
                            <td>{p.overflow ? 'to credits' : 'refused'}</td>
                            <td><Badge status={p.status} /></td>
                            <td>{p.status === 'active' && <ConfirmButton label="Archive" class="outline" question={`Archive ${p.name}? No new subscriptions; current subscribers keep it.`} onConfirm={() => act.run(async () => (await post('plans/archive', { plan_id: p.id }), list.reload()))} />}</td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  </div>
                )}
                <Subscriber city={city} plans={d.items} />
              </>
            )}
          </Show>
        </>
      )}
    </>
  );
}
