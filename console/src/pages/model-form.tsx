// Adding or editing a database model (ai/models/create|update): id, name, modes, the upstream
// model id, prices, limits and aliases. Empty fields are left out (a model replacing a built-in
// one keeps the built-in's value); the API judges every value and names the field it refuses.
import { useState } from 'preact/hooks';
import { ApiError, post } from '../api.ts';
import { ErrorBox, textInputs, useAction } from '../ui.tsx';

export const MODES = ['text', 'stream', 'compat', 'responses', 'messages', 'embeddings', 'image', 'tts', 'asr', 'video'] as const;
export const PRICE_FIELDS = [
  { key: 'input_per_mtok', label: 'Input / 1M tokens' },
  { key: 'output_per_mtok', label: 'Output / 1M tokens' },
  { key: 'cached_per_mtok', label: 'Cache read / 1M tokens' },
  { key: 'cache_write_per_mtok', label: 'Cache write 5 min / 1M tokens' },
  { key: 'cache_write_1h_per_mtok', label: 'Cache write 1 h / 1M tokens' },
  { key: 'per_image', label: 'Per image' },
  { key: 'per_second', label: 'Per second' },
  { key: 'per_request', label: 'Per request' },
] as const;

export interface AdminModel {
  model_id: string; name: string; description: string; modes: string[]; provider: string | null; upstream_model: string;
  prices: Record<string, number> | null; price_source: string | null; max_output_tokens: number | null; context_window: number | null;
  aliases: string[]; enabled: boolean; source: 'database' | 'builtin'; replaces_builtin: boolean; available: boolean; upstreams: string[];
  env_requirements?: { key: string; required: boolean }[];
}

interface Fields {
  model_id: string; name: string; description: string; modes: string[]; provider: string; upstream_model: string;
  prices: Record<string, string>; max_output_tokens: string; context_window: string; aliases: string;
}

const blank: Fields = { model_id: '', name: '', description: '', modes: ['text', 'stream', 'compat', 'responses', 'messages'], provider: '', upstream_model: '', prices: {}, max_output_tokens: '', context_window: '', aliases: '' };

const fieldsOf = (m: AdminModel): Fields => ({
  model_id: m.model_id,
  name: m.name,
  description: m.description,
  modes: m.modes,
  provider: m.provider ?? '',
  upstream_model: m.upstream_model,
  prices: Object.fromEntries(Object.entries(m.prices ?? {}).map(([k, v]) => [k, String(v)])),
  max_output_tokens: m.max_output_tokens == null ? '' : String(m.max_output_tokens),
  context_window: m.context_window == null ? '' : String(m.context_window),
  aliases: m.aliases.join(', '),
});

/** A number typed by the operator: empty is left out; anything else goes to the API, which judges it. */
const numberOrText = (s: string) => (s.trim() === '' ? undefined : /^-?\d+(\.\d+)?$/.test(s.trim()) ? Number(s) : s);

/** Adds a model (or replaces a built-in one: `base`), or edits a database model (`editing`). */
export function ModelForm({ editing, base, onDone }: { editing?: AdminModel; base?: AdminModel; onDone: () => void }) {
  const [f, setF] = useState<Fields>(editing ? fieldsOf(editing) : base ? fieldsOf(base) : blank);
  const [done, setDone] = useState<string | null>(null);
  const act = useAction();
  const p = editing ? `edit-model-${editing.model_id}` : 'new-model';
  const { input, invalid } = textInputs(p, f, setF, act.error);
  return (
    <form
      aria-label={editing ? `Edit model ${editing.model_id}` : 'Add a model'}
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(null);
        const prices: Record<string, unknown> = {};
        for (const { key } of PRICE_FIELDS) {
          const v = numberOrText(f.prices[key] ?? '');
          if (v !== undefined) prices[key] = v;
        }
        const body = {
          model_id: f.model_id.trim(),
          name: f.name.trim() || undefined,
          description: f.description || undefined,
          modes: f.modes,
          provider: f.provider.trim() || (editing ? null : undefined),
          upstream_model: f.upstream_model.trim() || undefined,
          // all empty: the built-in or catalog price (else free)
          prices: Object.keys(prices).length ? prices : editing ? null : undefined,
          max_output_tokens: numberOrText(f.max_output_tokens) ?? (editing ? null : undefined),
          context_window: numberOrText(f.context_window) ?? (editing ? null : undefined),
          aliases: f.aliases.split(/[\s,]+/).filter(Boolean),
        };
        const m = await act.run(() => post<AdminModel>(editing ? 'ai/models/update' : 'ai/models/create', body));
        if (m) {
          if (!editing) setF(blank);
          setDone(editing ? `Saved ${m.model_id}: every process uses it within about 2 s.` : `Added ${m.model_id}: callable now where an upstream serves it.`);
          onDone();
        }
      }}
    >
      <div class="form-grid">
        {input('model_id', 'Model id', { required: true, readOnly: !!editing, placeholder: 'e.g. acme/embed-small' })}
        {input('name', 'Name', { placeholder: 'display name (default: the id)' })}
        {input('upstream_model', 'Upstream model id', { placeholder: 'sent upstream (default: the id)' })}
        {input('provider', 'Env slot (optional)', { placeholder: 'e.g. textprovider; empty: the upstreams that list it' })}
        <div class="wide">
          <label for={`${p}-description`}>Description</label>
          <input id={`${p}-description`} autocomplete="off" value={f.description} onInput={(e) => setF({ ...f, description: e.currentTarget.value })} />
        </div>
        <fieldset class="wide" aria-invalid={invalid('modes')}>
          <legend>Modes</legend>
          {MODES.map((m) => (
            <label key={m} class="inline-check">
              <input
                type="checkbox"
                name={`${p}-mode-${m}`}
                checked={f.modes.includes(m)}
                onChange={(e) => setF({ ...f, modes: e.currentTarget.checked ? [...f.modes, m] : f.modes.filter((x) => x !== m) })}
              />{' '}
              {m}
            </label>
          ))}
        </fieldset>
        {PRICE_FIELDS.map(({ key, label }) => (
          <div key={key}>
            <label for={`${p}-price-${key}`}>{label}</label>
            <input
              id={`${p}-price-${key}`}
              inputMode="decimal"
              autocomplete="off"
              placeholder="credits"
              value={f.prices[key] ?? ''}
              aria-invalid={act.error instanceof ApiError && act.error.param === `prices.${key}` ? true : undefined}
              onInput={(e) => setF({ ...f, prices: { ...f.prices, [key]: e.currentTarget.value } })}
            />
          </div>
        ))}
        {input('max_output_tokens', 'Max output tokens', { inputMode: 'numeric' })}
        {input('context_window', 'Context window', { inputMode: 'numeric' })}
        <div class="wide">
          <label for={`${p}-aliases`}>Aliases</label>
          <input id={`${p}-aliases`} value={f.aliases} aria-invalid={invalid('aliases')} placeholder="gpt-5, claude-sonnet-4-5" onInput={(e) => setF({ ...f, aliases: e.currentTarget.value })} />
          <small>Other ids callers may use for this model, comma-separated (an alias wins over a built-in model of that id).</small>
        </div>
      </div>
      <p><small>Prices are in credits (1 USD = 1,000,000 credits); empty fields cost nothing; all empty = the catalog's price for the upstream model id, else free.</small></p>
      <button type="submit" class="auto" aria-busy={act.busy} disabled={act.busy}>{editing ? 'Save model' : 'Add model'}</button>
      <ErrorBox error={act.error} />
      {done && <p class="ok" role="status">{done}</p>}
    </form>
  );
}
