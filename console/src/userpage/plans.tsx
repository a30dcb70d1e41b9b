// The city's plans (plans/*, MESSAGES.md 02:31): the user's plan with its windows as meters
// (plans/me, read again every 5 s), cancel at the period's end or resume, Stripe's customer
// portal; without a plan, the city's plans to subscribe to. Checkouts and the portal open in a
// new tab, so this page stays and shows the plan as soon as the provider's event lands.
import { get, post } from '../api.ts';
import { Meters, money, windowLabel, type Plan, type SubscriptionView } from '../plan-meters.tsx';
import { Badge, ConfirmButton, ErrorBox, num, useAction, useLoad, when } from '../ui.tsx';
import { usePoll } from './hooks.ts';

/** Opens a provider's page in a new tab without handing it this page (no opener), then points it at the URL once known. */
async function openProvider(url: () => Promise<string>) {
  const tab = window.open('', '_blank');
  if (tab) tab.opener = null;
  try {
    const to = await url();
    if (tab) tab.location.href = to;
    else location.assign(to);
  } catch (e) {
    tab?.close();
    throw e;
  }
}

export function PlansSection() {
  const plans = useLoad(() => get<{ items: Plan[] }>('plans/list'), []);
  const me = useLoad(() => get<{ subscription: SubscriptionView | null }>('plans/me'), []);
  usePoll(me.reload, 5000);
  const act = useAction();
  const items = plans.data?.items ?? [];
  const sub = me.data?.subscription ?? null;
  // No plans and no subscription: the city sells credits only, so the section stays away.
  if (!sub && !items.length) return plans.error ? <ErrorBox error={plans.error} /> : null;
  return (
    <section class="panel" aria-labelledby="plans-h" data-testid="plans">
      <h2 id="plans-h">Plan</h2>
      <ErrorBox error={me.error ?? act.error} />
      {sub ? (
        <div class="plan-current">
          <p>
            <strong data-testid="plan-name">{sub.plan.name}</strong> <Badge status={sub.status} /> {money(sub.plan.price)} a {sub.plan.interval}
            {sub.period_end && <span class="muted"> · {sub.cancel_at_period_end ? 'ends' : 'renews'} {when(sub.period_end)}</span>}
          </p>
          {sub.cancel_at_period_end && <p class="notice">Cancelled: the plan serves until the end of the period, then your calls use your credits.</p>}
          {!sub.serving && <p class="notice">The plan is not serving now ({sub.status}): your calls use your credits.</p>}
          <Meters windows={sub.windows} />
          <div class="plan-actions">
            {sub.provider === 'stripe' && (
              <button type="button" class="secondary outline small" disabled={act.busy} onClick={() => act.run(() => openProvider(async () => (await post<{ url: string }>('plans/portal')).url))}>
                Billing and invoices
              </button>
            )}
            {sub.cancel_at_period_end ? (
              <button type="button" class="secondary small" disabled={act.busy} onClick={() => act.run(async () => (await post('plans/resume'), me.reload()))}>
                Keep the plan
              </button>
            ) : (
              <ConfirmButton
                label="Cancel the plan"
                class="danger outline small"
                question={`Cancel ${sub.plan.name}? It serves until the end of the period; then your calls use your credits.`}
                onConfirm={() => act.run(async () => (await post('plans/cancel'), me.reload()))}
              />
            )}
          </div>
        </div>
      ) : (
        <div class="plan-cards">
          {items.map((p) => (
            <article key={p.id} class="plan-card" data-plan={p.id}>
              <h3>{p.name}</h3>
              <p class="plan-price">
                <strong>{money(p.price)}</strong> a {p.interval}
              </p>
              {p.description && <p class="muted">{p.description}</p>}
              <ul>
                <li>{num(p.credits)} credits a {p.interval}</li>
                {p.windows.map((w) => (
                  <li key={w.window}>
                    at most {num(w.limit)} in any {windowLabel(w.window)}
                  </li>
                ))}
                <li>{p.models?.length ? `models: ${p.models.join(', ')}` : 'every model'}</li>
                <li>{p.overflow ? 'beyond it, calls use your credits' : 'calls stop at its limits'}</li>
              </ul>
              <button type="button" disabled={act.busy} onClick={() => act.run(() => openProvider(async () => (await post<{ checkout_url: string }>('plans/subscribe', { plan_id: p.id })).checkout_url))}>
                Subscribe
              </button>
            </article>
          ))}
        </div>
      )}
    </section>
  );
}
