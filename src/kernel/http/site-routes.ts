// The routes outside /v1 services: /, /metrics, the JWKS, /v1/services, /openapi.json, /docs, /console, /u/<city>/.
import type { Hono } from 'hono';
import { authenticate } from '../authenticate.ts';
import { serveConsole, type ConsoleAssets } from '../console.ts';
import { serveUserPage } from '../user-page.ts';
import type { GatewayContext } from '../context.ts';
import { safeEqual } from '../crypto.ts';
import { SCALAR_CDN, docsPage } from '../docs.ts';
import { GatewayError, notFound } from '../errors.ts';
import { metrics } from '../metrics.ts';
import { openApiDocument } from '../openapi.ts';

export interface SiteDeps {
  context: GatewayContext;
  docsScript?: () => Promise<BodyInit | null>;
  consoleAssets?: ConsoleAssets;
}

export function siteRoutes(app: Hono, d: SiteDeps): void {
  const { context } = d;
  const { config, env, keys, services } = context;

  app.get('/', (c) => c.json({ name: config.name, version: config.version, ok: true, health: '/health', docs: '/docs' }));

  // Prometheus text: the admin key, or METRICS_TOKEN as a bearer token (for a scraper that
  // should hold nothing more). 501 where the runtime keeps no metrics (Workers).
  app.get('/metrics', async (c) => {
    const bearer = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1]?.trim();
    const token = env.get('METRICS_TOKEN');
    if (!(token && bearer && (await safeEqual(bearer, token)))) {
      const identity = await authenticate(c.req.raw, context);
      if (identity.kind === 'guest') throw new GatewayError(401, 'missing_credential', 'GET /metrics needs the admin key or METRICS_TOKEN.');
      if (identity.kind !== 'admin') throw new GatewayError(403, 'identity_not_allowed', `A ${identity.kind} credential cannot read /metrics.`);
    }
    const out = await metrics().render();
    if (!out) throw new GatewayError(501, 'metrics_not_supported', 'This runtime keeps no metrics (see docs/ai.md, Metrics).');
    return new Response(out.text, { headers: { 'content-type': out.contentType, 'cache-control': 'no-store' } });
  });

  app.get('/.well-known/jwks.json', (c) => {
    c.header('cache-control', 'public, max-age=300');
    return c.json(keys.jwks());
  });

  app.get('/v1/services', async (c) => {
    const identity = await authenticate(c.req.raw, context);
    c.set('identity' as never, identity as never);
    const admin = identity.kind === 'admin';
    return c.json({
      items: [...services.values()].map((s) => ({
        id: s.id,
        name: s.name,
        env: (s.env ?? []).map((e) => ({ ...e, ...(admin ? { configured: env.has(e.key) } : {}) })),
      })),
    });
  });

  let openapi: unknown = null;
  app.get('/openapi.json', (c) => c.json((openapi ??= openApiDocument(services.values(), { title: config.name, version: config.version }))));

  app.get('/docs', (c) => c.html(docsPage(config.name, d.docsScript ? '/docs/scalar.js' : SCALAR_CDN)));
  app.get('/docs/scalar.js', async () => {
    const body = await d.docsScript?.();
    if (!body) throw notFound('route_not_found', 'The docs script is not bundled with this deployment.');
    return new Response(body, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=86400' } });
  });

  app.get('/console/*', async (c) => (await serveConsole(c.req.path, d.consoleAssets)) ?? c.notFound());
  app.get('/console', async (c) => (await serveConsole(c.req.path, d.consoleAssets))!);
  // Each city's users' page (docs/accounts.md, The users' page), built with the console.
  app.get('/u/*', async (c) => (await serveUserPage(c.req.path, context.cities, d.consoleAssets)) ?? c.notFound());
}
