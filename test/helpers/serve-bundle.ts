// npm test's gateways boot from one esbuild bundle of src/cli/main.ts, made in the global setup
// from the sources as they are (0.9 s), instead of from the ~900 modules those sources and their
// packages are. Node's module loader costs about half a gateway's boot: ~0.8 s of CPU per boot from
// the sources, ~0.35 s from the bundle, and npm test boots ~280 gateways. The code is the same;
// the product still runs from its sources (no build step on Node), and so do the tests that
// watch which modules a gateway loads (their --import hook), the CLI's and the README's.
//
// Sources find files next to themselves (import.meta.url, import.meta.dirname): in the bundle
// those stay the source file's own, so the console, the SQLite delete worker and package.json
// are found where they are. The bundle lives under node_modules/.cache, so the packages it
// resolves at run time (import.meta.resolve) are the repository's own.
import { readFile } from 'node:fs/promises';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '../..');
const PREFIX = 'citygate-test-serve-';

const sourcesWhereTheyAre: Plugin = {
  name: 'import-meta-of-the-source',
  setup(b) {
    b.onLoad({ filter: /\/src\/.*\.ts$/ }, async (args) => {
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.')) return { contents: text, loader: 'ts' };
      const here = text.replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path))).replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href));
      return { contents: here, loader: 'ts' };
    });
  },
};

/** Bundles the CLI into a new directory under node_modules/.cache; resolves with that directory and the entry file. */
export async function bundleServe(): Promise<{ dir: string; entry: string }> {
  const cache = join(ROOT, 'node_modules/.cache');
  mkdirSync(cache, { recursive: true });
  // a run that was killed left its bundle (~9 MB); one still running (a second copy) is younger
  for (const name of readdirSync(cache)) {
    const old = join(cache, name);
    if (name.startsWith(PREFIX) && Date.now() - statSync(old).mtimeMs > 6 * 3600_000) rmSync(old, { recursive: true, force: true });
  }
  const dir = mkdtempSync(join(cache, PREFIX));
  await build({
    entryPoints: [join(ROOT, 'src/cli/main.ts')],
    outdir: dir,
    bundle: true,
    splitting: true, // the lazily imported modules (AI SDKs, tracing, commands) stay lazy
    platform: 'node',
    format: 'esm',
    target: 'node24',
    plugins: [sourcesWhereTheyAre],
    logLevel: 'error',
    // the packages written as CommonJS call require(): one made for the bundle's own place
    banner: { js: "import { createRequire as __citygateRequire } from 'node:module'; const require = __citygateRequire(import.meta.url);" },
    external: ['pg-native', 'bufferutil', 'utf-8-validate'], // optional natives the packages try, never installed
  });
  return { dir, entry: join(dir, 'main.js') };
}
