// Health for load balancers and orchestrators:
//   GET /health        the service list once initialized (seed §1; unchanged);
//   GET /health/live   the process is up and its event loop turns (no database needed);
//   GET /health/ready  the process takes traffic: 503 while its database is unreachable and
//                      from the moment a drain (SIGTERM) begins.
// live and ready are answered before initialization and CORS (registered ahead of them).
import type { Hono } from 'hono';
import type { DatabaseOutage } from '../database-outage.ts';
import { GatewayError } from '../errors.ts';

export interface HealthDeps {
  health(): Promise<{ ok: boolean; services: string[] }>;
  draining(): boolean;
  outage: DatabaseOutage;
}

/** /health/live and /health/ready: register before any middleware that needs the database. */
export function probeRoutes(app: Hono, d: HealthDeps): void {
  const noStore = { 'cache-control': 'no-store' };
  app.get('/health/live', (c) => c.json({ ok: true }, 200, noStore));
  app.get('/health/ready', async (c) => {
    if (d.draining()) throw new GatewayError(503, 'draining', 'This process is stopping (draining); send traffic elsewhere.', { headers: noStore });
    if (!(await d.outage.check())) throw new GatewayError(503, 'database_unavailable', 'The database is unreachable from this process.', { headers: noStore });
    return c.json({ ok: true, ready: true }, 200, noStore);
  });
}

export function healthRoute(app: Hono, d: HealthDeps): void {
  app.get('/health', async (c) => c.json(await d.health()));
}
