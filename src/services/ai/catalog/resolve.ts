// From a requested model id and mode to something callable, or the errors:
// unknown model → 404 model_not_found; registered but no upstream can serve it now → 400
// model_not_available (the admin is told which key is missing); mode not supported → 400.
//
// A model is known, in this order, when an ai_models row has its id (models-table.ts: it
// replaces a built-in model of that id; a disabled row hides it), when an enabled row names it
// as an alias, when the registry has it (code, citygate.config.ts, TEXTPROVIDER_MODELS), or
// when an ai_upstreams row names it; a model only ai_upstreams names is a chat model (text,
// stream, compat, and the Responses and Messages APIs) priced by the catalog (prices.ts).
// A user's city may narrow the models to its allow-list (city-prices.ts), and a user's API key
// the city's to its own: any other is 404.
import type { GatewayContext } from '../../../kernel/context.ts';
import { GatewayError, notFound } from '../../../kernel/errors.ts';
import type { Identity } from '../../../kernel/identity.ts';
import type { CitySettings } from '../../../kernel/city-settings.ts';
import { cityAllows, keyAllows } from './city-prices.ts';
import { modelTableOf } from './models-table.ts';
import { modesOf } from './prices.ts';
import type { ProviderAdapter, ProviderCall } from '../providers/types.ts';
import type { Mode, ModelDef, ResolvedProvider } from './registry.ts';
import { candidatesOf, targetOf, type Target } from '../routing/route.ts';
import { upstreamTableOf, type Upstream } from '../routing/upstreams.ts';
import { registryOf } from '../state.ts';

export interface Resolved {
  model: ModelDef;
  /** The alias the caller named, when it named one. */
  alias?: string;
  /** The caller's city settings (a user's), for the city's prices. */
  city?: CitySettings;
  /** The model's enabled upstreams now (routing's candidates, for routeCall's `candidates`). */
  candidates: Upstream[];
  /** The first upstream routing would pick (for call sites that make one attempt). */
  target: Target;
  provider: ResolvedProvider;
  adapter: ProviderAdapter;
  call: ProviderCall;
}

const tableModels = new WeakMap<GatewayContext, Map<string, ModelDef>>();

/** A model named only by ai_upstreams rows. */
function tableModel(gw: GatewayContext, id: string): ModelDef | undefined {
  if (upstreamTableOf(gw).serving(id).length === 0) return undefined;
  let cache = tableModels.get(gw);
  if (!cache) tableModels.set(gw, (cache = new Map()));
  let m = cache.get(id);
  if (!m) {
    m = { id, name: id, description: 'Served by upstreams (ai/upstreams)', tags: ['chat'], meta: {}, modes: ['text', 'stream', 'compat', 'responses', 'messages'], provider: '', upstream: id };
    if (cache.size > 10_000) cache.clear();
    cache.set(id, m);
  }
  return m;
}

/** Every callable model: the registry's (or the ai_models rows replacing them), then those only ai_upstreams rows name, then the other ai_models rows. */
export function allModels(gw: GatewayContext): ModelDef[] {
  const reg = registryOf(gw).all(gw.env);
  const known = new Set(reg.map((m) => m.id));
  const extra = upstreamTableOf(gw)
    .modelIds()
    .filter((id) => !known.has(id))
    .map((id) => tableModel(gw, id)!);
  const table = modelTableOf(gw);
  if (table.size === 0) return [...reg, ...extra];
  const out: ModelDef[] = [];
  for (const m of reg) {
    const row = table.row(m.id);
    if (!row) out.push(m);
    else if (row.enabled) out.push(table.model(row, m)); // over the built-in it replaces
  }
  for (const m of extra) {
    const row = table.row(m.id);
    if (!row) out.push(m);
    else if (row.enabled) out.push(table.model(row, undefined));
    known.add(m.id);
  }
  for (const row of table.rows) if (row.enabled && !known.has(row.id)) out.push(table.model(row, undefined));
  return out;
}

/** The built-in model of an id: registered (code, config, env) or named by ai_upstreams only. */
export function builtinModel(gw: GatewayContext, id: string): ModelDef | undefined {
  return registryOf(gw).find(gw.env, id) ?? tableModel(gw, id);
}

/** The model of an id (not of an alias); undefined also when an ai_models row disables it. */
export function findModel(gw: GatewayContext, id: string): ModelDef | undefined {
  const table = modelTableOf(gw);
  const row = table.size ? table.row(id) : undefined;
  if (row) return row.enabled ? table.model(row, registryOf(gw).find(gw.env, id)) : undefined;
  return builtinModel(gw, id);
}

/** The model an id or alias names (an alias when its id is not the one asked for). */
export function lookupModel(gw: GatewayContext, id: string): ModelDef | undefined {
  const table = modelTableOf(gw);
  if (table.size) {
    const row = table.row(id);
    if (row) return row.enabled ? table.model(row, registryOf(gw).find(gw.env, id)) : undefined;
    const via = table.byAlias(id);
    if (via) return table.model(via, registryOf(gw).find(gw.env, via.id));
  }
  return builtinModel(gw, id);
}

/** The settings of the caller's city (a user's, or a bureau's: its city's view), from the in-memory city cache. */
export async function callerCity(gw: GatewayContext, identity: Identity): Promise<CitySettings | undefined> {
  if (identity.kind !== 'user' && identity.kind !== 'bureau') return undefined;
  return gw.cities.peek(identity.cityId)?.settings ?? (await gw.cities.settings(identity.cityId));
}

/** Why a model has no upstream now (for the admin), or null when it has one. */
export function unavailableReason(gw: GatewayContext, m: ModelDef): string | null {
  if (candidatesOf(gw, m).length) return null;
  const missing = m.provider ? registryOf(gw).missing(gw.env, m) : [];
  return missing.length ? `set ${missing.join(', ')} (env/upsert) or add an upstream (ai/upstreams/create)` : 'no enabled upstream serves it (ai/upstreams)';
}

export async function resolveModel(gw: GatewayContext, identity: Identity, id: string, mode: Mode): Promise<Resolved> {
  const loading = upstreamTableOf(gw).fresh();
  if (loading) await loading;
  const model = lookupModel(gw, id);
  const city = identity.kind === 'user' ? (gw.cities.peek(identity.cityId)?.settings ?? (await gw.cities.settings(identity.cityId))) : undefined;
  // A user API key's allow-list narrows the city's: any other model is as unknown to it.
  if (!model || !cityAllows(city, model.id, id) || !keyAllows(identity, model.id, id)) throw notFound('model_not_found', `The model '${id}' does not exist.`, 'model');
  const candidates = candidatesOf(gw, model);
  if (!candidates.length) {
    const msg = identity.kind === 'admin' ? `The model '${id}' is not callable: ${unavailableReason(gw, model)}.` : `The model '${id}' is not available now.`;
    throw new GatewayError(400, 'model_not_available', msg, { param: 'model' });
  }
  if (!modesOf(gw, model).includes(mode)) {
    throw new GatewayError(400, 'mode_not_supported', `The model '${id}' does not support ${mode} (it supports: ${modesOf(gw, model).join(', ') || 'nothing now'}).`, {
      param: 'model',
    });
  }
  return new ResolvedModel(gw, model, candidates, model.id === id ? undefined : id, city);
}

/** A class, not a literal with getters: built on every call, and a literal's getters cost closures each time. */
class ResolvedModel implements Resolved {
  readonly model: ModelDef;
  readonly candidates: Upstream[];
  readonly alias: string | undefined;
  readonly city: CitySettings | undefined;
  readonly #gw: GatewayContext;
  #target: Target | undefined;

  constructor(gw: GatewayContext, model: ModelDef, candidates: Upstream[], alias: string | undefined, city: CitySettings | undefined) {
    this.#gw = gw;
    this.model = model;
    this.candidates = candidates;
    this.alias = alias;
    this.city = city;
  }

  // Built on first use: routed calls (chat, responses, …) never read it.
  get target(): Target {
    return (this.#target ??= targetOf(this.#gw, this.candidates.reduce((a, b) => (b.priority < a.priority ? b : a)), this.model));
  }
  get provider(): ResolvedProvider {
    return this.target.provider;
  }
  get adapter(): ProviderAdapter {
    return this.target.adapter;
  }
  get call(): ProviderCall {
    return this.target.call;
  }
}

export const DEFAULT_TIMEOUT_MS = 120_000;

export const DEFAULT_STREAM_IDLE_MS = 60_000;

/** Longest a stream may go without a byte from its upstream, AI_STREAM_IDLE_TIMEOUT_MS (0: no limit). */
export function streamIdleMs(gw: GatewayContext): number {
  const raw = gw.env.get('AI_STREAM_IDLE_TIMEOUT_MS');
  if (raw === undefined || raw === '') return DEFAULT_STREAM_IDLE_MS;
  const v = Number(raw);
  return Number.isFinite(v) && v >= 0 ? v : DEFAULT_STREAM_IDLE_MS;
}

/** Deadline for an upstream answer (for a stream: its first byte), AI_UPSTREAM_TIMEOUT_MS. */
export function upstreamTimeoutMs(gw: GatewayContext): number {
  const v = Number(gw.env.get('AI_UPSTREAM_TIMEOUT_MS'));
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_TIMEOUT_MS;
}
