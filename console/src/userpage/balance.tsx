// The balance and buying credits: payment/checkout with return_to = this page, then the
// provider's checkout in this tab; the gateway sends the buyer back with ?payment_status=.
import { useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { Badge, ErrorBox, num, useAction, useLoad, usd, when } from '../ui.tsx';
import { usePoll, type Balance, type PayMethod } from './hooks.ts';

const AMOUNTS = [5, 10, 25, 50];

export function BalanceSection() {
  const balance = useLoad(() => get<Balance>('balance/me'), []);
  usePoll(balance.reload, 5000);
  const b = balance.data;
  return (
    <section class="panel" aria-labelledby="balance-h">
      <h2 id="balance-h">Balance</h2>
      <ErrorBox error={balance.error} />
      <div class="cards">
        <div class="card">
          <span>Credits</span>
          <strong data-testid="balance-credits">{b ? num(b.credits) : '…'}</strong>
        </div>
        <div class="card">
          <span>Worth</span>
          <strong data-testid="balance-usd">{b ? usd(b.credits) : '…'}</strong>
        </div>
        {b?.budget && (
          <div class="card">
            <span>Spending cap this {b.budget.period}</span>
            <strong>{num(b.budget.remaining)} left</strong>
            <small class="muted">of {num(b.budget.credits)}; resets {when(b.budget.resets_at)}</small>
          </div>
        )}
      </div>
      <BuyCredits />
      <Payments />
    </section>
  );
}

/** Minor units (cents, yen) in the currency's own format. */
function money(minor: number, currency: string): string {
  try {
    const f = new Intl.NumberFormat('en-US', { style: 'currency', currency: currency.toUpperCase() });
    return f.format(minor / 10 ** (f.resolvedOptions().maximumFractionDigits ?? 2));
  } catch {
    return `${minor} ${currency}`;
  }
}

interface Payment { payment_id: string; provider: string; status: string; credits: number; credited: number | null; amount: number; currency: string; created_at: string }

/** The user's last top-ups (payments/me), so a pending one is seen until its provider confirms it. */
function Payments() {
  const list = useLoad(() => get<{ items: Payment[] }>('payment/payments/me', { limit: 5 }), []);
  usePoll(list.reload, 5000);
  const items = list.data?.items ?? [];
  if (!items.length) return null;
  return (
    <details class="payments">
      <summary>Your last payments</summary>
      <ul>
        {items.map((p) => (
          <li key={p.payment_id} data-payment={p.payment_id}>
            <span class="nowrap">{when(p.created_at)}</span> <Badge status={p.status} /> {num(p.credited ?? p.credits)} credits ·{' '}
            {money(p.amount, p.currency)} · {p.provider}
          </li>
        ))}
      </ul>
    </details>
  );
}

function BuyCredits() {
  const methods = useLoad(() => get<{ credits_per_usd: number; items: PayMethod[] }>('payment/methods'), []);
  const [dollars, setDollars] = useState('10');
  const act = useAction();
  const enabled = methods.data?.items.filter((m) => m.enabled) ?? [];
  if (methods.error) return <ErrorBox error={methods.error} />;
  if (!methods.data) return null;
  if (!enabled.length) return <p class="muted">Buying credits is not set up on this gateway.</p>;
  const rate = methods.data.credits_per_usd;
  const amount = Number(dollars);
  const credits = Number.isFinite(amount) && amount > 0 ? Math.round(amount * rate) : 0;
  const buy = (method: string) =>
    act.run(async () => {
      const r = await post<{ checkout_url: string }>('payment/checkout', { method, credits, return_to: location.origin + location.pathname });
      location.assign(r.checkout_url);
    });
  return (
    <form class="buy" onSubmit={(e) => e.preventDefault()}>
      <h3>Buy credits</h3>
      <fieldset class="amounts" aria-label="Amount">
        {AMOUNTS.map((a) => (
          <label key={a} class="amount">
            <input type="radio" name="amount" value={String(a)} checked={dollars === String(a)} onChange={() => setDollars(String(a))} />${a}
          </label>
        ))}
      </fieldset>
      <label for="buy-amount">Amount in USD</label>
      <input id="buy-amount" type="number" min="1" step="1" inputMode="decimal" value={dollars} onInput={(e) => setDollars(e.currentTarget.value)} />
      <p class="muted" data-testid="buy-credits">{credits ? `${num(credits)} credits` : 'Enter an amount'}</p>
      <ErrorBox error={act.error} />
      <div class="buy-actions">
        {enabled.map((m) => (
          <button type="button" key={m.method} disabled={!credits || act.busy} aria-busy={act.busy} onClick={() => buy(m.method)}>
            Pay with {m.name}
          </button>
        ))}
      </div>
    </form>
  );
}
