// A city's models and prices over the base ones (cities/update: models, price_multiplier,
// prices). It takes the base price that prices.ts yields and returns the city's:
//   city price = base × price_multiplier, then the fields of the city's entry for the model;
// a free model (no base price, no entry) stays free. The usage record keeps the cost at both,
// so credits − base_credits is the city's margin.
//
// City settings come from the kernel's in-memory city cache (no database read per call); the
// city's price of a model is made once per settings object (replaced when the city changes)
// and base price, so a call allocates nothing here.
import type { CitySettings } from '../../../kernel/city-settings.ts';
import type { Identity } from '../../../kernel/identity.ts';
import type { Prices } from '../../../kernel/metering.ts';

/** May the city's users call this model (asked for by `asked`, an alias or its id)? */
export function cityAllows(s: CitySettings | undefined, modelId: string, asked: string): boolean {
  const list = s?.models;
  return !list || list.includes(modelId) || (asked !== modelId && list.includes(asked));
}

/** A user API key's allow-list (accounts/keys models), with the same rule: the model's id or the alias asked for. */
export function keyAllows(identity: Identity, modelId: string, asked: string): boolean {
  const list = identity.kind === 'user' ? identity.key?.models : null;
  return !list || list.includes(modelId) || (asked !== modelId && list.includes(asked));
}

const made = new WeakMap<CitySettings, Map<string, { base: Prices | null; city: Prices | null }>>();

/** The city's price of a model from its base price (the same object when the city changes nothing). */
export function cityPrices(s: CitySettings | undefined, modelId: string, base: Prices | null): Prices | null {
  if (!s) return base;
  const entry = s.prices?.[modelId];
  const k = s.price_multiplier ?? 1;
  if (!entry && k === 1) return base;
  if (!entry && !base) return null;
  let byModel = made.get(s);
  if (!byModel) made.set(s, (byModel = new Map()));
  const hit = byModel.get(modelId);
  if (hit && hit.base === base) return hit.city;
  const city: Prices = {};
  if (base) for (const [f, v] of Object.entries(base) as [keyof Prices, number | undefined][]) if (typeof v === 'number') city[f] = v * k;
  if (entry) Object.assign(city, entry);
  if (byModel.size > 1000) byModel.clear();
  byModel.set(modelId, { base, city });
  return city;
}
