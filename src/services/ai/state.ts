// Per-gateway state of the ai service (one registry per gateway context).
import type { GatewayContext } from '../../kernel/context.ts';
import { Registry, type AiConfig } from './catalog/registry.ts';

/** Capability name under which a runtime hands the project's citygate.config.ts to the ai service. */
export const AI_CONFIG = 'ai.config';

const registries = new WeakMap<GatewayContext, Registry>();

export function registryOf(gw: GatewayContext): Registry {
  let r = registries.get(gw);
  if (!r) {
    r = new Registry(gw.use<AiConfig>(AI_CONFIG) ?? {});
    registries.set(gw, r);
  }
  return r;
}
