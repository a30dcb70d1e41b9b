// Builds the admin console (console/ → console/dist/) with Vite. Run by `npm install` and
// `npm ci` (the root `prepare` script) and by `npm run build:console`.
// Where the build tools are absent (`npm ci --omit=dev`, or an install before the sources are
// copied, as in the Dockerfile's first layer) it says so and succeeds: the gateway then answers
// /console with a page that says how to build it.
import { existsSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const here = import.meta.dirname;
const require = createRequire(import.meta.url);
const has = (m: string) => {
  try {
    require.resolve(m, { paths: [here] });
    return true;
  } catch {
    return false;
  }
};

if (!existsSync(join(here, 'src/main.tsx'))) {
  console.log('citygate console: no sources here, not built');
} else if (!has('vite') || !has('@preact/preset-vite')) {
  console.log('citygate console: the build tools (dev dependencies) are not installed, not built');
} else {
  const { build } = await import('vite');
  const started = performance.now();
  await build({ configFile: join(here, 'vite.config.ts') });
  // Cloudflare's static assets read headers from dist/_headers (the same ones Node sends).
  const { CONSOLE_HEADERS } = await import('../src/kernel/console.ts');
  const lines = Object.entries(CONSOLE_HEADERS).map(([k, v]) => `  ${k}: ${v}`);
  writeFileSync(join(here, 'dist/_headers'), `/console/*\n${lines.join('\n')}\n`);
  console.log(`citygate console: built in ${Math.round(performance.now() - started)} ms → console/dist/console/`);
}
