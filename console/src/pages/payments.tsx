// Payments: status, provider and amount, filtered by city and status; sync one with its
// provider (admin: reads the checkout back and applies what the provider says).
import { useState } from 'preact/hooks';
import { get, post, type Page } from '../api.ts';
import { useWho } from '../app.tsx';
import { useCities } from '../cities.ts';
import { Badge, Empty, ErrorBox, num, PageHead, Show, useAction, useLoad, when } from '../ui.tsx';

interface Payment { payment_id: string; city_id: string; user_id: string; provider: string; status: string; credits: number; amount: number; currency: string; amount_paid: number | null; created_at: string; paid_at: string | null }

const money = (minor: number, currency: string) => {
  try {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency: currency.toUpperCase() }).format(minor / 100);
  } catch {
    return `${minor} ${currency}`;
  }
};

function SyncButton({ p, onDone }: { p: Payment; onDone: () => void }) {
  const act = useAction();
  return (
    <>
      <button type="button" class="secondary outline" aria-busy={act.busy} disabled={act.busy} onClick={() => act.run(async () => (await post('payment/payments/sync', { payment_id: p.payment_id }), onDone()))}>
        Sync
      </button>
      <ErrorBox error={act.error} />
    </>
  );
}

export function Payments() {
  const who = useWho();
  const cities = useCities();
  const [city, setCity] = useState('');
  const [status, setStatus] = useState('');
  const [cursors, setCursors] = useState<string[]>([]);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const page = useLoad(() => get<Page<Payment>>('payment/payments', { city_id: city, status, cursor, limit: 50 }), [city, status, cursor]);
  const reset = () => (setCursor(undefined), setCursors([]));
  return (
    <>
      <PageHead title="Payments">
        <select aria-label="City" value={city} onChange={(e) => (setCity(e.currentTarget.value), reset())}>
          <option value="">All cities</option>
          {(cities.data ?? []).map((c) => (
            <option key={c.city_id} value={c.city_id}>{c.city_id}</option>
          ))}
        </select>
        <select aria-label="Status" value={status} onChange={(e) => (setStatus(e.currentTarget.value), reset())}>
          <option value="">Any status</option>
          {['pending', 'paid', 'expired', 'failed'].map((s) => (
            <option key={s} value={s}>{s}</option>
          ))}
        </select>
      </PageHead>
      <Show load={page}>
        {(p) =>
          p.items.length === 0 ? (
            <Empty>No payments{status || city ? ' match these filters' : ' yet'}. Users top up with <code>POST /v1/payment/checkout</code> once a provider is configured (PAYMENT_A_* for Stripe, PAYMENT_B_* for Creem on the Env page).</Empty>
          ) : (
            <>
              <div class="table-wrap">
                <table class="striped">
                  <thead><tr><th>Payment</th><th>City / user</th><th>Provider</th><th>Status</th><th class="num">Amount</th><th class="num">Credits</th><th>Created</th>{who.kind === 'admin' && <th />}</tr></thead>
                  <tbody>
                    {p.items.map((x) => (
                      <tr key={x.payment_id}>
                        <td><code>{x.payment_id}</code></td>
                        <td>{x.city_id} / {x.user_id}</td>
                        <td>{x.provider}</td>
                        <td><Badge status={x.status} />{x.paid_at && <small> {when(x.paid_at)}</small>}</td>
                        <td class="num">{money(x.amount, x.currency)}</td>
                        <td class="num">{num(x.credits)}</td>
                        <td>{when(x.created_at)}</td>
                        {who.kind === 'admin' && <td>{x.status !== 'paid' && <SyncButton p={x} onDone={page.reload} />}</td>}
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <div class="pager">
                <button type="button" class="secondary outline" disabled={!cursors.length} onClick={() => (setCursor(cursors[cursors.length - 1] || undefined), setCursors(cursors.slice(0, -1)))}>Newer</button>
                <button type="button" class="secondary outline" disabled={!p.next_cursor} onClick={() => (setCursors([...cursors, cursor ?? '']), setCursor(p.next_cursor!))}>Older</button>
              </div>
            </>
          )
        }
      </Show>
    </>
  );
}
