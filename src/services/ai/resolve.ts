// From a requested model id and mode to something callable, or the errors:
// unknown model → 404 model_not_found; registered but no upstream can serve it now → 400
// model_not_available (the admin is told which key is missing); mode not supported → 400.
//
// A model is known when the registry has it (code, citygate.config.ts, TEXTPROVIDER_MODELS)
// or when an ai_upstreams row names it; a model only the table names is a chat model
// (text, stream, compat, and the Responses and Messages APIs) priced by the catalog (prices.ts).
import type { GatewayContext } from '../../kernel/context.ts';
import { GatewayError, notFound } from '../../kernel/errors.ts';
import type { Identity } from '../../kernel/identity.ts';
import { modesOf } from './prices.ts';
import type { ProviderAdapter, ProviderCall } from './providers/types.ts';
import type { Mode, ModelDef, ResolvedProvider } from './registry.ts';
import { candidatesOf, targetOf, type Target } from './routing/route.ts';
import { upstreamTableOf, type Upstream } from './routing/upstreams.ts';
import { registryOf } from './state.ts';

export interface Resolved {
  model: ModelDef;
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

/** Every model: the registry's, then those only ai_upstreams rows name. */
export function allModels(gw: GatewayContext): ModelDef[] {
  const reg = registryOf(gw).all(gw.env);
  const known = new Set(reg.map((m) => m.id));
  const extra = upstreamTableOf(gw)
    .modelIds()
    .filter((id) => !known.has(id))
    .map((id) => tableModel(gw, id)!);
  return [...reg, ...extra];
}

export function findModel(gw: GatewayContext, id: string): ModelDef | undefined {
  return registryOf(gw).find(gw.env, id) ?? tableModel(gw, id);
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
  const model = findModel(gw, id);
  if (!model) throw notFound('model_not_found', `The model '${id}' does not exist.`, 'model');
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
  return new ResolvedModel(gw, model, candidates);
}

/** A class, not a literal with getters: built on every call, and a literal's getters cost closures each time. */
class ResolvedModel implements Resolved {
  readonly model: ModelDef;
  readonly candidates: Upstream[];
  readonly #gw: GatewayContext;
  #target: Target | undefined;

  constructor(gw: GatewayContext, model: ModelDef, candidates: Upstream[]) {
    this.#gw = gw;
    this.model = model;
    this.candidates = candidates;
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

/** Deadline for an upstream answer (for a stream: its first byte), AI_UPSTREAM_TIMEOUT_MS. */
export function upstreamTimeoutMs(gw: GatewayContext): number {
  const v = Number(gw.env.get('AI_UPSTREAM_TIMEOUT_MS'));
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_TIMEOUT_MS;
}
