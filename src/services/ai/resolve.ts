// From a requested model id and mode to something callable, or the errors:
// unknown model → 404 model_not_found; registered but missing a required key → 400
// model_not_available (the admin is told which key); mode not supported → 400.
import type { GatewayContext } from '../../kernel/context.ts';
import { GatewayError, notFound } from '../../kernel/errors.ts';
import type { Identity } from '../../kernel/identity.ts';
import { modesOf } from './prices.ts';
import { adapters } from './providers/index.ts';
import type { ProviderAdapter, ProviderCall } from './providers/types.ts';
import type { Mode, ModelDef, ResolvedProvider } from './registry.ts';
import { registryOf } from './state.ts';

export interface Resolved {
  model: ModelDef;
  provider: ResolvedProvider;
  adapter: ProviderAdapter;
  call: ProviderCall;
}

export function resolveModel(gw: GatewayContext, identity: Identity, id: string, mode: Mode): Resolved {
  const reg = registryOf(gw);
  const model = reg.find(gw.env, id);
  if (!model) throw notFound('model_not_found', `The model '${id}' does not exist.`, 'model');
  const missing = reg.missing(gw.env, model);
  if (missing.length) {
    const msg =
      identity.kind === 'admin'
        ? `The model '${id}' is not callable: set ${missing.join(', ')} (env/upsert).`
        : `The model '${id}' is not available now.`;
    throw new GatewayError(400, 'model_not_available', msg, { param: 'model' });
  }
  if (!modesOf(gw, model).includes(mode)) {
    throw new GatewayError(400, 'mode_not_supported', `The model '${id}' does not support ${mode} (it supports: ${modesOf(gw, model).join(', ') || 'nothing now'}).`, {
      param: 'model',
    });
  }
  const provider = reg.resolveProvider(gw.env, model);
  const adapter = adapters[provider.slot.kind];
  return { model, provider, adapter, call: { provider, http: gw.http } };
}

export const DEFAULT_TIMEOUT_MS = 120_000;

/** Deadline for an upstream answer (for a stream: its headers), AI_UPSTREAM_TIMEOUT_MS. */
export function upstreamTimeoutMs(gw: GatewayContext): number {
  const v = Number(gw.env.get('AI_UPSTREAM_TIMEOUT_MS'));
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_TIMEOUT_MS;
}
