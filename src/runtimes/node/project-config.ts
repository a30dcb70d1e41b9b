// The optional citygate.config.ts (or .js/.mjs) of the working directory: models and provider
// slots the project adds to the ai registry (docs/ai.md describes the format).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AiConfig } from '../../services/ai/catalog/registry.ts';

export interface ProjectConfig {
  ai?: AiConfig;
}

export const CONFIG_FILES = ['citygate.config.ts', 'citygate.config.mjs', 'citygate.config.js'];

export async function loadProjectConfig(dir = process.cwd()): Promise<{ path: string | null; config: ProjectConfig }> {
  for (const name of CONFIG_FILES) {
    const path = resolve(join(dir, name));
    if (!existsSync(path)) continue;
    const mod = (await import(pathToFileURL(path).href)) as { default?: unknown };
    const cfg = (mod.default ?? mod) as ProjectConfig & AiConfig;
    if (!cfg || typeof cfg !== 'object') throw new Error(`${name} must export default an object`);
    // Accept both { ai: { models, providers } } and { models, providers } at the top.
    const ai: AiConfig = cfg.ai ?? { models: cfg.models, providers: cfg.providers };
    return { path, config: { ai } };
  }
  return { path: null, config: {} };
}
