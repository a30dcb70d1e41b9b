// Upstreams as data: the ai_upstreams table, its admin input schemas, and a per-process
// snapshot that the hot path reads synchronously. A write through this process replaces the
// snapshot at once; other processes and isolates reload it when it is older than
// UPSTREAMS_TTL_MS (2 s), so a change reaches every process within about 2 s plus one query.
//
// API keys are stored sealed under the master key (secrets at rest, like the env table's
// secrets; label upstreamKeyLabel(id)) and opened when the snapshot loads: the hot path reads
// the clear key from memory, the database never holds it in clear.
//
// The same refresh loads the models of the ai_models table (catalog/models-table.ts): one
// snapshot rule for both, and one check on the hot path.
//
// The env slots (TEXTPROVIDER_*, OPENAI_*, ANTHROPIC_*, GOOGLE_*, and slots of
// citygate.config.ts) are upstreams too: built-in ones, derived from the registry and the env
// on every use, listed but not editable (change them with env/upsert).
import { z } from 'zod';
import type { GatewayContext } from '../../../kernel/context.ts';
import { randomToken } from '../../../kernel/crypto.ts';
import { isSealed, upstreamKeyLabel } from '../../../kernel/secrets.ts';
import type { AiUpstreamsTable } from '../../../db/schema.ts';
import type { ModelDef, ProviderKind, ProviderSlot } from '../catalog/registry.ts';
import type { RuntimeEnv } from '../../../kernel/runtime-env.ts';
import { modelTableOf } from '../catalog/models-table.ts';

export const UPSTREAMS_TTL_MS = 2000;
export const KINDS = ['openai-compatible', 'openai', 'anthropic', 'google'] as const;

const DEFAULT_BASE_URL: Record<ProviderKind, string | null> = {
  'openai-compatible': null,
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com/v1',
  google: 'https://generativelanguage.googleapis.com/v1beta',
};

/** One upstream as routing sees it (a row of ai_upstreams, or a built-in env slot). */
export interface Upstream {
  id: string;
  name: string;
  kind: ProviderKind;
  baseUrl: string;
  apiKey: string;
  /** catalog model id → the id sent upstream */
  models: Map<string, string>;
  weight: number;
  priority: number;
  enabled: boolean;
  timeoutMs: number | null;
  builtin: boolean;
  /** The provider slot the adapters read (id, kind, passthrough). */
  slot: ProviderSlot;
  createdAt: number | null;
  updatedAt: number | null;
}

// ---- input -----------------------------------------------------------------------------

const httpUrl = z
  .string()
  .max(2048)
  .refine((u) => /^https?:\/\//i.test(u) && URL.canParse(u), { message: 'must be an http(s) URL' });
const modelId = z.string().trim().min(1).max(256);
const modelRef = z.union([modelId, z.object({ id: modelId, upstream_model: modelId }).strict()]);

export const upstreamFields = {
  name: z.string().trim().min(1).max(128),
  kind: z.enum(KINDS, { message: `must be one of: ${KINDS.join(', ')}` }),
  base_url: httpUrl,
  api_key: z.string().min(1).max(4096),
  models: z.array(modelRef).min(1, { message: 'must name at least one model' }).max(1000),
  weight: z.number().int().min(1).max(10_000),
  priority: z.number().int().min(-1000).max(1000),
  enabled: z.boolean(),
  timeout_ms: z.number().int().min(100).max(600_000),
};
const f = upstreamFields;

export const createInput = z
  .object({
    name: f.name,
    kind: f.kind,
    base_url: f.base_url.optional(),
    api_key: f.api_key.optional(),
    models: f.models,
    weight: f.weight.default(1),
    priority: f.priority.default(0),
    enabled: f.enabled.default(true),
    timeout_ms: f.timeout_ms.nullish(),
  })
  .strict();

export const updateInput = z
  .object({
    upstream_id: z.string().min(1).max(64),
    name: f.name.optional(),
    kind: f.kind.optional(),
    base_url: f.base_url.optional(),
    api_key: f.api_key.nullish().describe('null removes the key'),
    models: f.models.optional(),
    weight: f.weight.optional(),
    priority: f.priority.optional(),
    enabled: f.enabled.optional(),
    timeout_ms: f.timeout_ms.nullish(),
  })
  .strict();

export type CreateInput = z.output<typeof createInput>;
export type UpdateInput = z.output<typeof updateInput>;
type ModelRef = z.output<typeof modelRef>;

export function defaultBaseUrl(kind: ProviderKind): string | null {
  return DEFAULT_BASE_URL[kind];
}

// ---- rows ------------------------------------------------------------------------------

function modelsMap(refs: ModelRef[]): Map<string, string> {
  const m = new Map<string, string>();
  for (const r of refs) {
    if (typeof r === 'string') m.set(r, r);
    else m.set(r.id, r.upstream_model);
  }
  return m;
}

/** An upstream from its row; `apiKey` is the row's key opened (the row holds it sealed). */
function fromRow(r: AiUpstreamsTable, apiKey: string): Upstream {
  let refs: ModelRef[] = [];
  try {
    refs = JSON.parse(r.models) as ModelRef[];
  } catch {
    /* a row written by hand: serves nothing */
  }
  const kind = (KINDS as readonly string[]).includes(r.kind) ? (r.kind as ProviderKind) : 'openai-compatible';
  const baseUrl = r.base_url.replace(/\/+$/, '');
  return {
    id: r.upstream_id,
    name: r.name,
    kind,
    baseUrl,
    apiKey,
    models: modelsMap(refs),
    weight: Number(r.weight),
    priority: Number(r.priority),
    enabled: Number(r.enabled) === 1,
    timeoutMs: r.timeout_ms === null ? null : Number(r.timeout_ms),
    builtin: false,
    slot: { id: r.upstream_id, kind, apiKeyEnv: '', defaultBaseUrl: baseUrl },
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

/** The admin's view: the key is write-only (whether it is set and its last 4 characters). */
export function publicView(u: Upstream, state: Record<string, string>) {
  return {
    upstream_id: u.id,
    name: u.name,
    kind: u.kind,
    base_url: u.baseUrl,
    has_key: u.apiKey !== '',
    key_last4: u.apiKey.length >= 12 ? u.apiKey.slice(-4) : null,
    models: [...u.models].map(([id, up]) => (id === up ? id : { id, upstream_model: up })),
    weight: u.weight,
    priority: u.priority,
    enabled: u.enabled,
    timeout_ms: u.timeoutMs,
    builtin: u.builtin,
    state,
    created_at: u.createdAt === null ? null : new Date(u.createdAt).toISOString(),
    updated_at: u.updatedAt === null ? null : new Date(u.updatedAt).toISOString(),
  };
}

// ---- the per-process snapshot ------------------------------------------------------------

export class UpstreamTable {
  readonly gw: GatewayContext;
  #rows: Upstream[] = [];
  #byModel = new Map<string, Upstream[]>();
  #loadedAt = 0;
  #loading: Promise<void> | null = null;
  /** Opened keys by row and sealed form, so a refresh (every 2 s) decrypts only what changed. */
  #opened = new Map<string, string>();

  constructor(gw: GatewayContext) {
    this.gw = gw;
  }

  /** What the row stores for a key: sealed when there is a master key. */
  async #seal(id: string, key: string | null): Promise<string | null> {
    const box = this.gw.env.secrets;
    if (!key || !box) return key;
    const sealed = await box.seal(key, upstreamKeyLabel(id));
    this.#opened.set(`${id}:${sealed}`, key);
    return sealed;
  }

  /** The clear key of a row ('' when it has none, or when a sealed key does not open). */
  async #open(id: string, stored: string | null): Promise<string> {
    if (!stored) return '';
    if (!isSealed(stored)) return stored; // no master key (or sealed at the next boot)
    // Keyed by row too: a sealed key copied into another row must not open there from the cache.
    const hit = this.#opened.get(`${id}:${stored}`);
    if (hit !== undefined) return hit;
    const box = this.gw.env.secrets;
    if (!box) return '';
    try {
      const key = await box.open(stored, upstreamKeyLabel(id));
      if (this.#opened.size > 10_000) this.#opened.clear();
      this.#opened.set(`${id}:${stored}`, key);
      return key;
    } catch {
      return ''; // damaged, or moved to another row: as if unset (the boot check catches a wrong master key)
    }
  }

  get rows(): readonly Upstream[] {
    return this.#rows;
  }

  /** Upstreams of the table that name this model (enabled or not). */
  serving(modelId: string): readonly Upstream[] {
    return this.#byModel.get(modelId) ?? [];
  }

  /** Model ids named by any upstream of the table. */
  modelIds(): string[] {
    return [...this.#byModel.keys()];
  }

  find(id: string): Upstream | undefined {
    return this.#rows.find((u) => u.id === id);
  }

  async refresh(): Promise<void> {
    this.#loading ??= (async () => {
      try {
        const k = this.gw.db.kysely;
        const [rows, models] = await Promise.all([
          k.selectFrom('ai_upstreams').selectAll().orderBy('created_at').execute(),
          k.selectFrom('ai_models').selectAll().orderBy('created_at').execute(),
        ]);
        const upstreams = await Promise.all(rows.map(async (r) => fromRow(r, await this.#open(r.upstream_id, r.api_key))));
        modelTableOf(this.gw).set(models);
        this.#set(upstreams);
      } finally {
        this.#loading = null;
      }
    })();
    return this.#loading;
  }

  /** Reloads after a write of this process: a refresh already under way may have read before it. */
  async reload(): Promise<void> {
    if (this.#loading) await this.#loading.catch(() => {});
    return this.refresh();
  }

  /** Reloads when older than UPSTREAMS_TTL_MS (one small SELECT); undefined when fresh (no promise to wait for on every call). */
  fresh(): Promise<void> | undefined {
    return Date.now() - this.#loadedAt > UPSTREAMS_TTL_MS ? this.refresh() : undefined;
  }

  #set(rows: Upstream[]): void {
    const byModel = new Map<string, Upstream[]>();
    for (const u of rows) for (const id of u.models.keys()) byModel.set(id, [...(byModel.get(id) ?? []), u]);
    this.#rows = rows;
    this.#byModel = byModel;
    this.#loadedAt = Date.now();
  }

  async create(input: CreateInput): Promise<Upstream> {
    const t = Date.now();
    const baseUrl = input.base_url ?? defaultBaseUrl(input.kind);
    if (!baseUrl) throw Object.assign(new Error('base_url'), { field: 'base_url' });
    const id = `ups_${randomToken(9)}`;
    const row: AiUpstreamsTable = {
      upstream_id: id,
      name: input.name,
      kind: input.kind,
      base_url: baseUrl,
      api_key: await this.#seal(id, input.api_key ?? null),
      models: JSON.stringify(input.models),
      weight: input.weight,
      priority: input.priority,
      enabled: input.enabled ? 1 : 0,
      timeout_ms: input.timeout_ms ?? null,
      created_at: t,
      updated_at: t,
    };
    await this.gw.db.kysely.insertInto('ai_upstreams').values(row).execute();
    await this.reload();
    return fromRow(row, input.api_key ?? '');
  }

  /** Applies the given fields; undefined when there is no such upstream. */
  async update(input: UpdateInput): Promise<Upstream | undefined> {
    const set: Partial<AiUpstreamsTable> = { updated_at: Date.now() };
    if (input.name !== undefined) set.name = input.name;
    if (input.kind !== undefined) set.kind = input.kind;
    if (input.base_url !== undefined) set.base_url = input.base_url;
    if (input.api_key !== undefined) set.api_key = await this.#seal(input.upstream_id, input.api_key);
    if (input.models !== undefined) set.models = JSON.stringify(input.models);
    if (input.weight !== undefined) set.weight = input.weight;
    if (input.priority !== undefined) set.priority = input.priority;
    if (input.enabled !== undefined) set.enabled = input.enabled ? 1 : 0;
    if (input.timeout_ms !== undefined) set.timeout_ms = input.timeout_ms;
    const r = await this.gw.db.kysely.updateTable('ai_upstreams').set(set).where('upstream_id', '=', input.upstream_id).executeTakeFirst();
    await this.reload();
    return Number(r.numUpdatedRows) > 0 ? this.find(input.upstream_id) : undefined;
  }

  async remove(id: string): Promise<boolean> {
    const r = await this.gw.db.kysely.deleteFrom('ai_upstreams').where('upstream_id', '=', id).executeTakeFirst();
    await this.reload();
    return Number(r.numDeletedRows) > 0;
  }
}

const tables = new WeakMap<GatewayContext, UpstreamTable>();

export function upstreamTableOf(gw: GatewayContext): UpstreamTable {
  let t = tables.get(gw);
  if (!t) tables.set(gw, (t = new UpstreamTable(gw)));
  return t;
}

// ---- built-in upstreams (env slots) ---------------------------------------------------------

export const builtinId = (slotId: string) => `env:${slotId}`;

/** One model's env-slot upstream by slot, model, base URL and key: routing asks on every call. */
const builtins = new Map<string, Upstream>();

const lastBuiltin = new WeakMap<ModelDef, { slot: ProviderSlot; rawBase: string; apiKey: string; upstream: string; u: Upstream }>();

/** The env slot of a registered model as an upstream (enabled when its key is set). */
export function builtinUpstream(env: RuntimeEnv, slot: ProviderSlot, models: ModelDef[]): Upstream {
  const rawBase = (slot.baseUrlEnv && env.get(slot.baseUrlEnv)) || slot.defaultBaseUrl;
  const apiKey = env.get(slot.apiKeyEnv) ?? '';
  if (models.length !== 1) return makeBuiltin(slot, models, rawBase, apiKey);
  const m = models[0];
  // The model's last answer, when nothing it depends on changed: no key string to build and hash.
  const last = lastBuiltin.get(m);
  if (last && last.slot === slot && last.rawBase === rawBase && last.apiKey === apiKey && last.upstream === m.upstream) return last.u;
  const key = `${slot.id}\0${m.id}\0${m.upstream}\0${rawBase}\0${apiKey}`;
  let u = builtins.get(key);
  if (!u) {
    if (builtins.size >= 1000) builtins.clear();
    builtins.set(key, (u = makeBuiltin(slot, models, rawBase, apiKey)));
  }
  lastBuiltin.set(m, { slot, rawBase, apiKey, upstream: m.upstream, u });
  return u;
}

function makeBuiltin(slot: ProviderSlot, models: ModelDef[], rawBase: string, apiKey: string): Upstream {
  const baseUrl = rawBase.replace(/\/+$/, '');
  return {
    id: builtinId(slot.id),
    name: slot.id,
    kind: slot.kind,
    baseUrl,
    apiKey,
    models: new Map(models.map((m) => [m.id, m.upstream])),
    weight: 1,
    priority: 0,
    enabled: apiKey !== '',
    timeoutMs: null,
    builtin: true,
    slot,
    createdAt: null,
    updatedAt: null,
  };
}
