// GET /console: the admin console, a single-page app built from console/ (Vite) and served by
// the gateway itself. The runtime hands over the built files (Node reads console/dist; on
// Workers the platform's static assets serve them before the Worker runs). The app talks
// only to the public /v1 API with the credential the operator types in.

/** One built file of the console, by its path under /console/ ("index.html", "assets/x.js"). */
export interface ConsoleAssets {
  get(path: string): Promise<{ body: BodyInit; type: string } | null>;
}

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
  png: 'image/png',
  ico: 'image/x-icon',
  woff2: 'font/woff2',
  json: 'application/json',
  txt: 'text/plain; charset=utf-8',
};
export const contentTypeOf = (path: string) => TYPES[path.slice(path.lastIndexOf('.') + 1)] ?? 'application/octet-stream';

/**
 * Headers of every console response: the page may load and call only its own origin (so it
 * cannot leak the key to a third party), may not be framed, and sends no referrer.
 */
export const CONSOLE_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

/** A file path under /console/ that stays inside it, or null. */
export function consolePath(pathname: string): string | null {
  const rest = pathname.slice('/console/'.length);
  if (rest === '') return 'index.html';
  if (!/^[A-Za-z0-9._/-]+$/.test(rest) || rest.split('/').some((s) => s === '' || s === '.' || s === '..')) return null;
  return rest;
}

export const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>citygate console</title>
<p>The console is not built in this installation. Run <code>npm run build:console</code> (or <code>npm install</code>) and restart the gateway.</p>`;

/** The console's routes: /console → /console/, index and hashed assets (cached for a year). */
export async function serveConsole(pathname: string, assets: ConsoleAssets | undefined): Promise<Response | null> {
  if (pathname === '/console') return new Response(null, { status: 308, headers: { location: '/console/' } });
  const path = consolePath(pathname);
  if (path === null) return null;
  const file = assets ? await assets.get(path) : null;
  if (!file) {
    if (path !== 'index.html') return null;
    return new Response(NOT_BUILT, { status: 503, headers: { ...CONSOLE_HEADERS, 'content-type': contentTypeOf(path) } });
  }
  const immutable = path.startsWith('assets/');
  return new Response(file.body, {
    headers: {
      ...CONSOLE_HEADERS,
      'content-type': file.type,
      'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
    },
  });
}
