// The console's built files inside a Worker, for the pages the Worker itself answers (each
// city's users' page at /u/<city_id>/ reads users.html): through the static-assets binding
// ASSETS that `citygate deploy` declares. /console/* itself is served by Cloudflare before the
// Worker runs.
import type { ConsoleAssets } from '../../kernel/console.ts';
import type { WorkerEnv } from './types.ts';

interface AssetsBinding {
  fetch(req: Request): Promise<Response>;
}

export const ASSETS_BINDING = 'ASSETS';

export function workerConsoleAssets(env: WorkerEnv): ConsoleAssets | undefined {
  const b = env[ASSETS_BINDING] as AssetsBinding | undefined;
  if (!b || typeof b.fetch !== 'function') return undefined;
  return {
    async get(path) {
      // html_handling may answer foo.html with a redirect to its pretty URL: follow it once.
      let res = await b.fetch(new Request(`https://assets.local/console/${path}`));
      const to = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
      if (to) res = await b.fetch(new Request(new URL(to, 'https://assets.local/')));
      if (!res.ok) return null;
      return { body: await res.arrayBuffer(), type: res.headers.get('content-type') ?? 'text/html; charset=utf-8' };
    },
  };
}
