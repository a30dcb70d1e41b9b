// upstream.circuit_opened / upstream.circuit_closed for the operator's endpoints. A breaker
// lives in each process's memory (ai/routing/health.ts), so there is no change row to share a
// batch with: the event is its own one-statement write, in the background; each process
// reports its own breaker.
import type { GatewayContext } from '../../kernel/context.ts';
import { dispatchSoon } from './dispatch.ts';
import { eventStatement } from './events.ts';

export function circuitEvent(gw: GatewayContext, type: 'upstream.circuit_opened' | 'upstream.circuit_closed', upstream: string, model: string, data: Record<string, unknown> = {}): void {
  const at = Date.now();
  gw.waitUntil(
    gw.db
      .batch([eventStatement(gw.db, { type, cityId: null, data: { upstream, model, ...data }, at })])
      .then(() => dispatchSoon(gw))
      .catch((e) => {
        if (!gw.databaseDown(e)) gw.log('warn', 'webhooks: could not write a circuit event', { error: String(e) });
      }),
  );
}
