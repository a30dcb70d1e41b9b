// A circuit breaker per upstream MCP server, per process: ai routing's (ai/routing/health.ts,
// the same thresholds AI_COOLDOWN_FAILURES and AI_COOLDOWN_MS, the same half-open probe and
// the same upstream.circuit_opened/closed events to the operator), keyed `mcp:<server id>` so
// one failing server never closes another, nor any model upstream.
import type { GatewayContext } from '../../kernel/context.ts';
import { Health, healthKey } from '../ai/routing/health.ts';
import type { ServerRow } from './store.ts';

const breakers = new WeakMap<GatewayContext, Health>();

export function breakerOf(gw: GatewayContext): Health {
  let h = breakers.get(gw);
  if (!h) breakers.set(gw, (h = new Health(gw)));
  return h;
}

/** The breaker's key of a server (its `upstream` in metrics and webhook events: `mcp:<name>`). */
export const breakerKey = (row: Pick<ServerRow, 'city_id' | 'name'>) => healthKey(`mcp:${row.city_id}/${row.name}`, '');
