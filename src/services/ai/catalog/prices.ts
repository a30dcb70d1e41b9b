// Model prices and enabled modes, with runtime overrides from the env:
//   MODEL_PRICES = {"<model id>": {"input_per_mtok": 150000, "output_per_mtok": 600000}, "<id>": null}
//   MODEL_MODES  = {"<model id>": ["text", "compat"]}
// Both are read from the env table first, then the process env, and apply at once. A value
// that does not parse is ignored (with one warning) so a typo never breaks the hot path.
import type { GatewayContext } from '../../../kernel/context.ts';
import type { Prices } from '../../../kernel/metering.ts';
import type { RuntimeEnv } from '../../../kernel/runtime-env.ts';
import { MODES, type ModelDef, type Mode } from './registry.ts';
import { catalogOf } from './catalog.ts';
import { findModel } from './resolve.ts';

const PRICE_FIELDS = ['input_per_mtok', 'output_per_mtok', 'cached_per_mtok', 'cache_write_per_mtok', 'cache_write_1h_per_mtok', 'per_image', 'per_second', 'per_request'] as const;

type Parsed<T> = { raw: string | undefined; value: Map<string, T> };
let pricesCache: Parsed<Prices | null> = { raw: undefined, value: new Map() };
let modesCache: Parsed<Mode[]> = { raw: undefined, value: new Map() };
const warned = new Set<string>();

function parseJsonMap(raw: string | undefined, key: string, warn: (m: string) => void): Record<string, unknown> {
  if (!raw) return {};
  try {
    const v = JSON.parse(raw);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    /* reported below */
  }
  if (!warned.has(`${key}:${raw}`)) {
    warned.add(`${key}:${raw}`);
    warn(`${key} is not a JSON object of model id → value; ignored`);
  }
  return {};
}

export function validPrices(v: unknown): Prices | null | undefined {
  if (v === null) return null;
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const out: Prices = {};
  for (const f of PRICE_FIELDS) {
    const n = (v as Record<string, unknown>)[f];
    if (n === undefined) continue;
    if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) return undefined;
    out[f] = n;
  }
  return out;
}

function priceOverrides(env: RuntimeEnv, warn: (m: string) => void): Map<string, Prices | null> {
  const raw = env.get('MODEL_PRICES');
  if (pricesCache.raw === raw) return pricesCache.value;
  const map = new Map<string, Prices | null>();
  for (const [id, v] of Object.entries(parseJsonMap(raw, 'MODEL_PRICES', warn))) {
    const p = validPrices(v);
    if (p === undefined) warn(`MODEL_PRICES: the entry for '${id}' is not a price object; ignored`);
    else map.set(id, p);
  }
  pricesCache = { raw, value: map };
  return map;
}

function modeOverrides(env: RuntimeEnv, warn: (m: string) => void): Map<string, Mode[]> {
  const raw = env.get('MODEL_MODES');
  if (modesCache.raw === raw) return modesCache.value;
  const map = new Map<string, Mode[]>();
  for (const [id, v] of Object.entries(parseJsonMap(raw, 'MODEL_MODES', warn))) {
    if (Array.isArray(v) && v.every((m) => MODES.includes(m))) map.set(id, v as Mode[]);
    else warn(`MODEL_MODES: the entry for '${id}' is not a list of modes; ignored`);
  }
  modesCache = { raw, value: map };
  return map;
}

const warner = (gw: GatewayContext) => (m: string) => gw.log('warn', m);

/** A model's prices now: MODEL_PRICES first, then prices registered in code or config, then the catalog; null means free. */
export function pricesOf(gw: GatewayContext, m: ModelDef): Prices | null {
  const o = priceOverrides(gw.env, warner(gw));
  if (o.has(m.id)) return o.get(m.id)!;
  const p = m.prices !== undefined ? m.prices : (catalogOf(m)?.prices ?? null);
  return p && Object.keys(p).length > 0 ? p : null;
}

/** Where a model's price comes from: MODEL_PRICES, the registry (code / citygate.config.ts), a database model (ai/models/*), the catalog, or null (free). */
export function priceSourceOf(gw: GatewayContext, m: ModelDef): 'MODEL_PRICES' | 'registry' | 'database' | 'catalog' | null {
  if (priceOverrides(gw.env, warner(gw)).has(m.id)) return 'MODEL_PRICES';
  if (m.prices !== undefined) return m.prices ? (m.source === 'database' ? 'database' : 'registry') : null;
  return catalogOf(m) ? 'catalog' : null;
}

/** The price of a model by id (for the balance service and admin tools); undefined: no such model. */
export function priceOf(gw: GatewayContext, modelId: string): Prices | null | undefined {
  const m = findModel(gw, modelId);
  return m ? pricesOf(gw, m) : undefined;
}

/** The modes a model can be called with now: its registered modes, narrowed by MODEL_MODES. */
export function modesOf(gw: GatewayContext, m: ModelDef): Mode[] {
  const o = modeOverrides(gw.env, warner(gw)).get(m.id);
  return o ? m.modes.filter((x) => o.includes(x)) : m.modes;
}
