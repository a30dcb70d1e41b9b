// The model registry: every model citygate can call, registered in code (stock slots below,
// plus whatever citygate.config.ts adds). A model names its provider slot, its upstream id,
// the modes it supports, its env requirements and its prices. Which models are callable is
// decided per request from the runtime env (env table first, then the process env), so an
// env/upsert of a key makes its models callable at once.
import type { RuntimeEnv } from '../../../kernel/runtime-env.ts';
import type { EnvRequirement } from '../../../kernel/service.ts';
import type { Prices } from '../../../kernel/metering.ts';
import { catalogOf } from './catalog.ts';

export const MODES = ['text', 'stream', 'compat', 'responses', 'messages', 'embeddings', 'image', 'video', 'tts', 'asr'] as const;
export type Mode = (typeof MODES)[number];

/** What kind of API a provider speaks; each kind is a folder-like module in providers/. */
export type ProviderKind = 'openai-compatible' | 'openai' | 'anthropic' | 'google';

export interface ProviderSlot {
  id: string;
  kind: ProviderKind;
  /** Env key of the API key (required for the slot's models). */
  apiKeyEnv: string;
  /** Env key that overrides the base URL, if any. */
  baseUrlEnv?: string;
  defaultBaseUrl: string;
  /**
   * openai-compatible only: chat/completions is forwarded byte for byte (default true). Set
   * false for upstreams that are only roughly compatible: requests are then translated
   * through the AI SDK.
   */
  passthrough?: boolean;
}

export interface ModelDef {
  id: string;
  name: string;
  description?: string;
  tags?: string[];
  meta?: Record<string, unknown>;
  /** The modes registered in code (the admin's `default_modes`). */
  modes: Mode[];
  /** Provider slot id. */
  provider: string;
  /** The model id sent upstream. */
  upstream: string;
  /** Extra env requirements besides the slot's own (rare). */
  env?: EnvRequirement[];
  /** Credits (1 USD = 1,000,000); null: free; absent: the catalog's price (catalog.ts), else free. MODEL_PRICES overrides. */
  prices?: Prices | null;
  /** Upper bound of output tokens used for credit reservations when a request sets none. */
  maxOutputTokens?: number;
  /** Context window in tokens, when known (shown in the catalog). */
  contextWindow?: number;
  /** Other ids callers may name it by (database models: ai/models/*). */
  aliases?: string[];
  /** 'database': an ai_models row (catalog/models-table.ts); absent: registered in code or config. */
  source?: 'database';
}

export interface AiConfig {
  providers?: ProviderSlot[];
  models?: ModelDef[];
}

export const TEXTPROVIDER_DEFAULT_BASE_URL = 'https://api.openai.com/v1';
export const TEXTPROVIDER_DEFAULT_MODELS = 'gpt-4o-mini';

const M = 1_000_000; // credits per USD

export const STOCK_PROVIDERS: ProviderSlot[] = [
  {
    id: 'textprovider',
    kind: 'openai-compatible',
    apiKeyEnv: 'TEXTPROVIDER_API_KEY',
    baseUrlEnv: 'TEXTPROVIDER_BASE_URL',
    defaultBaseUrl: TEXTPROVIDER_DEFAULT_BASE_URL,
  },
  { id: 'openai', kind: 'openai', apiKeyEnv: 'OPENAI_API_KEY', baseUrlEnv: 'OPENAI_BASE_URL', defaultBaseUrl: 'https://api.openai.com/v1' },
  { id: 'anthropic', kind: 'anthropic', apiKeyEnv: 'ANTHROPIC_API_KEY', defaultBaseUrl: 'https://api.anthropic.com/v1' },
  {
    id: 'google',
    kind: 'google',
    apiKeyEnv: 'GOOGLE_GENERATIVE_AI_API_KEY',
    defaultBaseUrl: 'https://generativelanguage.googleapis.com/v1beta',
  },
];

export const chatModes: Mode[] = ['text', 'stream', 'compat', 'responses', 'messages'];
/** The client API families of a chat model: one registered with `compat` and neither of the
 *  others is callable through all three (the Responses and Messages APIs are chat too). */
const CHAT_APIS: Mode[] = ['responses', 'messages'];
export function withChatApis(modes: Mode[]): Mode[] {
  return modes.includes('compat') && !modes.some((m) => CHAT_APIS.includes(m)) ? [...modes, ...CHAT_APIS] : modes;
}
export const STOCK_MODELS: ModelDef[] = [
  // OpenAI slot
  { id: 'openai/gpt-4.1', name: 'GPT-4.1', provider: 'openai', upstream: 'gpt-4.1', modes: chatModes, tags: ['openai', 'chat'], maxOutputTokens: 32768 },
  { id: 'openai/gpt-4.1-mini', name: 'GPT-4.1 mini', provider: 'openai', upstream: 'gpt-4.1-mini', modes: chatModes, tags: ['openai', 'chat'], maxOutputTokens: 32768 },
  { id: 'openai/gpt-4o-mini', name: 'GPT-4o mini', provider: 'openai', upstream: 'gpt-4o-mini', modes: chatModes, tags: ['openai', 'chat'], maxOutputTokens: 16384 },
  { id: 'openai/text-embedding-3-small', name: 'Text Embedding 3 small', provider: 'openai', upstream: 'text-embedding-3-small', modes: ['embeddings'], tags: ['openai', 'embeddings'], prices: { input_per_mtok: 0.02 * M } },
  { id: 'openai/text-embedding-3-large', name: 'Text Embedding 3 large', provider: 'openai', upstream: 'text-embedding-3-large', modes: ['embeddings'], tags: ['openai', 'embeddings'], prices: { input_per_mtok: 0.13 * M } },
  { id: 'openai/gpt-image-1', name: 'GPT Image 1', provider: 'openai', upstream: 'gpt-image-1', modes: ['image'], tags: ['openai', 'image'], prices: { per_image: 0.042 * M } },
  {
    id: 'openai/tts-1',
    name: 'TTS 1',
    description: 'Text to speech; input_per_mtok is per 1M input characters.',
    provider: 'openai',
    upstream: 'tts-1',
    modes: ['tts'],
    tags: ['openai', 'speech'],
    prices: { input_per_mtok: 15 * M },
  },
  { id: 'openai/whisper-1', name: 'Whisper', provider: 'openai', upstream: 'whisper-1', modes: ['asr'], tags: ['openai', 'transcription'], prices: { per_second: 100 } },
  { id: 'openai/sora-2', name: 'Sora 2', provider: 'openai', upstream: 'sora-2', modes: ['video'], tags: ['openai', 'video'], prices: { per_second: 0.1 * M } },
  // Anthropic and Google through the AI SDK
  { id: 'anthropic/claude-sonnet-4-5', name: 'Claude Sonnet 4.5', provider: 'anthropic', upstream: 'claude-sonnet-4-5', modes: chatModes, tags: ['anthropic', 'chat'], maxOutputTokens: 64000 },
  { id: 'anthropic/claude-haiku-4-5', name: 'Claude Haiku 4.5', provider: 'anthropic', upstream: 'claude-haiku-4-5', modes: chatModes, tags: ['anthropic', 'chat'], maxOutputTokens: 64000 },
  { id: 'google/gemini-2.5-flash', name: 'Gemini 2.5 Flash', provider: 'google', upstream: 'gemini-2.5-flash', modes: chatModes, tags: ['google', 'chat'], maxOutputTokens: 65536 },
  { id: 'google/gemini-embedding-001', name: 'Gemini Embedding', provider: 'google', upstream: 'gemini-embedding-001', modes: ['embeddings'], tags: ['google', 'embeddings'], prices: { input_per_mtok: 0.15 * M } },
  { id: 'google/gemini-2.5-pro', name: 'Gemini 2.5 Pro', provider: 'google', upstream: 'gemini-2.5-pro', modes: chatModes, tags: ['google', 'chat'], maxOutputTokens: 65536 },
];

/** The output-token worst case of a model that declares none (docs/money.md, "Reserve"). */
export const DEFAULT_MAX_OUTPUT_TOKENS = 8192;

/**
 * The output tokens a call may produce, for its credit hold: the limits the request gives
 * (the larger, when it gives both: upstreams differ in which one they honour), else the
 * model's maximum, else the default worst case. The one place a catalog's limits plug in.
 */
export function maxOutputOf(model: Pick<ModelDef, 'maxOutputTokens' | 'upstream' | 'provider'>, ...requested: (number | null | undefined)[]): number {
  const given = requested.filter((n): n is number => typeof n === 'number' && n > 0);
  if (given.length) return Math.max(...given);
  return model.maxOutputTokens ?? catalogOf(model)?.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
}

/** `id` or `id=upstream_id`, comma-separated. */
export function parseModelList(list: string): { id: string; upstream: string }[] {
  const out: { id: string; upstream: string }[] = [];
  for (const item of list.split(',')) {
    const t = item.trim();
    if (!t) continue;
    const eq = t.indexOf('=');
    const id = (eq < 0 ? t : t.slice(0, eq)).trim();
    const upstream = (eq < 0 ? t : t.slice(eq + 1)).trim();
    if (id && upstream) out.push({ id, upstream });
  }
  return out;
}

export interface ResolvedProvider {
  slot: ProviderSlot;
  apiKey: string;
  baseUrl: string;
}

/** Registered models and slots; TEXTPROVIDER_MODELS is read from the env on every use. */
export class Registry {
  readonly providers = new Map<string, ProviderSlot>();
  #fixed: ModelDef[];
  #textList: { raw: string; models: ModelDef[] } | null = null;

  constructor(config: AiConfig = {}) {
    for (const p of [...STOCK_PROVIDERS, ...(config.providers ?? [])]) this.providers.set(p.id, p);
    const configured = config.models ?? [];
    for (const m of configured) {
      if (!this.providers.has(m.provider)) throw new Error(`citygate config: model '${m.id}' names unknown provider '${m.provider}'`);
      for (const mode of m.modes) if (!MODES.includes(mode)) throw new Error(`citygate config: model '${m.id}' has unknown mode '${mode}'`);
    }
    // Models from the config come first, so they may replace a stock model of the same id.
    const ids = new Set(configured.map((m) => m.id));
    this.#fixed = [...configured.map((m) => ({ ...m, modes: withChatApis(m.modes) })), ...STOCK_MODELS.filter((m) => !ids.has(m.id))];
  }

  /** Every registered model, in catalog order (text provider models first). */
  all(env: RuntimeEnv): ModelDef[] {
    const fixed = new Set(this.#fixed.map((m) => m.id));
    return [...this.#textModels(env).filter((m) => !fixed.has(m.id)), ...this.#fixed];
  }

  find(env: RuntimeEnv, id: string): ModelDef | undefined {
    return this.#fixed.find((m) => m.id === id) ?? this.#textModels(env).find((m) => m.id === id);
  }

  /** The env requirements of a model: its slot's key (required) and base URL (optional). */
  requirements(m: ModelDef): EnvRequirement[] {
    let reqs = this.#requirements.get(m);
    if (!reqs) this.#requirements.set(m, (reqs = this.#requirementsOf(m)));
    return reqs;
  }

  /** Model definitions are not changed once made: their requirements are computed once. */
  #requirements = new WeakMap<ModelDef, EnvRequirement[]>();

  #requirementsOf(m: ModelDef): EnvRequirement[] {
    const slot = this.providers.get(m.provider)!;
    const reqs: EnvRequirement[] = [{ key: slot.apiKeyEnv, description: `API key of the ${slot.id} provider`, required: true }];
    if (slot.baseUrlEnv) {
      reqs.push({ key: slot.baseUrlEnv, description: `Base URL of the ${slot.id} API (default ${slot.defaultBaseUrl})`, required: false });
    }
    return [...reqs, ...(m.env ?? [])];
  }

  /** Required env keys that are not set now. */
  missing(env: RuntimeEnv, m: ModelDef): string[] {
    return this.requirements(m).filter((r) => r.required && !env.has(r.key)).map((r) => r.key);
  }

  resolveProvider(env: RuntimeEnv, m: ModelDef): ResolvedProvider {
    const slot = this.providers.get(m.provider)!;
    const baseUrl = ((slot.baseUrlEnv && env.get(slot.baseUrlEnv)) || slot.defaultBaseUrl).replace(/\/+$/, '');
    return { slot, apiKey: env.get(slot.apiKeyEnv) ?? '', baseUrl };
  }

  #textModels(env: RuntimeEnv): ModelDef[] {
    const raw = env.get('TEXTPROVIDER_MODELS') ?? TEXTPROVIDER_DEFAULT_MODELS;
    if (this.#textList?.raw === raw) return this.#textList.models;
    const models = parseModelList(raw).map(
      ({ id, upstream }): ModelDef => ({
        id,
        name: id,
        description: upstream === id ? 'Text provider model' : `Text provider model (${upstream})`,
        tags: ['textprovider', 'chat'],
        meta: {},
        modes: chatModes,
        provider: 'textprovider',
        upstream,
        // priced by the catalog when it knows the upstream id (else free), unless MODEL_PRICES says otherwise
      }),
    );
    this.#textList = { raw, models };
    return models;
  }
}
