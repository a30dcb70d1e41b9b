// The console's built files on Node: console/dist/console/ of this package, built by
// `npm install` (the prepare script) or `npm run build:console`. Read per request, so a
// rebuild shows without a restart; paths are checked by the kernel (consolePath).
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { contentTypeOf, type ConsoleAssets } from '../../kernel/console.ts';

export const CONSOLE_DIST = resolve(import.meta.dirname, '../../../console/dist/console');

export function nodeConsoleAssets(dir = CONSOLE_DIST): ConsoleAssets {
  return {
    async get(path) {
      try {
        return { body: await readFile(join(dir, path)), type: contentTypeOf(path) };
      } catch {
        return null;
      }
    },
  };
}
