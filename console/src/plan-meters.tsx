// A plan and a subscription as the console shows them (the Plans and Users pages, and the
// users' page): the types of plans/list and plans/subscription, and the windows as meters.
import { num, when } from './ui.tsx';

export interface Plan {
  id: string;
  city_id: string;
  name: string;
  description: string;
  interval: 'month' | 'year';
  price: { amount: number; currency: string };
  credits: number;
  windows: { window: number; limit: number }[];
  models: string[] | null;
  overflow: boolean;
  stripe_price_id: string | null;
  creem_product_id: string | null;
  order: number;
  status: 'active' | 'archived';
}
export interface WindowView { name: string; seconds: number | null; limit: number; used: number; remaining: number; resets_at: string | null }
export interface SubscriptionView { id: string; plan: Plan; provider: string; status: string; serving: boolean; cancel_at_period_end: boolean; period_start: string | null; period_end: string | null; windows: WindowView[] }

export const windowLabel = (s: number) => (s % 86_400 === 0 ? `${s / 86_400} d` : s % 3600 === 0 ? `${s / 3600} h` : `${Math.round(s / 60)} min`);
export const money = (p: Plan['price']) => `${(p.amount / 100).toFixed(2)} ${p.currency.toUpperCase()}`;

/** Each window of a subscription as a meter: used of limit, and when it frees. */
export function Meters({ windows }: { windows: WindowView[] }) {
  return (
    <div class="meters">
      {windows.map((w) => (
        <div key={w.name} class="meter">
          <label>
            <strong>{w.name === 'period' ? 'This period' : `Any ${w.name}`}</strong> — {num(w.used)} of {num(w.limit)} credits used
            <progress value={w.used} max={w.limit} aria-label={`${w.name} window`} />
          </label>
          <small>{num(w.remaining)} left{w.resets_at ? ` · frees ${when(w.resets_at)}` : ''}</small>
        </div>
      ))}
    </div>
  );
}

