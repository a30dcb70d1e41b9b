// Upstreams on the Models page (admin): where each model is routed, the circuit state of each
// (upstream, model) in the process that answered, and adding, disabling and removing
// upstreams. The API key is write-only: the list shows whether one is set and its last 4.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, get, post } from '../api.ts';
import { href } from '../router.ts';
import { Badge, ConfirmButton, Empty, ErrorBox, Show, textInputs, useAction, useLoad, when } from '../ui.tsx';

type Health = 'cooling_down' | 'half_open';
type ModelRef = string | { id: string; upstream_model: string };
export interface Upstream {
  upstream_id: string; name: string; kind: string; base_url: string; has_key: boolean; key_last4: string | null;
  models: ModelRef[]; weight: number; priority: number; enabled: boolean; timeout_ms: number | null; builtin: boolean;
  state: Record<string, Health>; created_at?: string | null; updated_at?: string | null;
}

const KINDS = ['openai-compatible', 'openai', 'anthropic', 'google'];
const REFRESH_MS = 5000;

/** The circuit as the breaker names it: closed (called), open (skipped), half-open (one probe may go). */
const CIRCUIT: Record<Health | 'ok', { label: string; badge: string; title: string }> = {
  ok: { label: 'closed', badge: 'ok', title: 'healthy: calls go to it' },
  cooling_down: { label: 'open', badge: 'error', title: 'failed repeatedly (or was rate-limited): skipped until its cooldown ends' },
  half_open: { label: 'half-open', badge: 'paused', title: 'cooldown over: the next call is a probe that closes or re-opens it' },
};

const modelId = (m: ModelRef) => (typeof m === 'string' ? m : m.id);

function Key({ u }: { u: Upstream }) {
  if (!u.has_key) return <small class="muted">no key</small>;
  // Never the key itself: the API sends its last 4 characters at most (keys of 12+ characters).
  return <small class="nowrap" title="API key (write-only)">set <code class="masked">••••{u.key_last4 ?? ''}</code></small>;
}

/** One line per state: how many of its models are open or half-open, else closed. */
function Summary({ u }: { u: Upstream }) {
  if (!u.enabled) return <Badge status={u.builtin && !u.has_key ? 'missing-key' : 'disabled'} />;
  const states = Object.values(u.state);
  const open = states.filter((s) => s === 'cooling_down').length;
  const half = states.filter((s) => s === 'half_open').length;
  if (!open && !half) return <span class="badge badge-ok" title={CIRCUIT.ok.title}>closed</span>;
  return (
    <>
      {open > 0 && <span class="badge badge-error" title={CIRCUIT.cooling_down.title}>open · {open} model{open > 1 ? 's' : ''}</span>}{' '}
      {half > 0 && <span class="badge badge-paused" title={CIRCUIT.half_open.title}>half-open · {half}</span>}
    </>
  );
}

function Models({ u }: { u: Upstream }) {
  return (
    <ul class="model-list">
      {u.models.map((m) => {
        const id = modelId(m);
        const c = CIRCUIT[u.state[id] ?? 'ok'];
        return (
          <li key={id} data-model={id}>
            <code>{id}</code>
            {typeof m !== 'string' && <small class="muted"> → {m.upstream_model}</small>}{' '}
            {u.enabled && <span class={`badge badge-${c.badge}`} title={c.title}>{c.label}</span>}
          </li>
        );
      })}
    </ul>
  );
}

function Row({ u, onChange }: { u: Upstream; onChange: () => void }) {
  const act = useAction();
  const [editing, setEditing] = useState(false);
  const update = (patch: Record<string, unknown>) => act.run(async () => (await post('ai/upstreams/update', { upstream_id: u.upstream_id, ...patch }), onChange()));
  return (
    <>
      <tr data-upstream={u.upstream_id}>
        <td>
          <strong>{u.name}</strong> {u.builtin && <small class="muted">(env slot)</small>}
          <div><small class="muted">{u.kind}</small></div>
          <div><small class="muted url">{u.base_url}</small></div>
          {!u.builtin && <div><code><small>{u.upstream_id}</small></code></div>}
        </td>
        <td data-testid="health" class="nowrap"><Summary u={u} /></td>
        <td><Models u={u} /></td>
        <td><Key u={u} /></td>
        <td>
          <small class="nowrap">
            priority {u.priority}
            <br />
            weight {u.weight}
            <br />
            timeout {u.timeout_ms == null ? 'default' : `${u.timeout_ms} ms`}
          </small>
        </td>
        <td>
          {u.builtin ? (
            <small class="muted">An env slot: change its keys on the <a href={href('env')}>Env</a> page.</small>
          ) : (
            <div class="actions-row">
              <button type="button" class="secondary outline" aria-expanded={editing} onClick={() => setEditing(!editing)}>
                Edit…
              </button>
              <button type="button" class="secondary outline" disabled={act.busy} onClick={() => update({ enabled: !u.enabled })}>
                {u.enabled ? 'Disable' : 'Enable'}
              </button>
              <ConfirmButton
                label="Remove"
                class="danger outline"
                question={`Remove upstream ${u.name}? Its models stop being routed to it at once (other upstreams of the same models keep serving).`}
                onConfirm={() => act.run(async () => (await post('ai/upstreams/remove', { upstream_id: u.upstream_id }), onChange()))}
              />
            </div>
          )}
        </td>
      </tr>
      {(act.error != null || editing) && (
        <tr class="sub">
          <td colSpan={6}>
            <ErrorBox error={act.error} />
            {editing && <UpstreamForm editing={u} onDone={onChange} />}
          </td>
        </tr>
      )}
    </>
  );
}

/** "a, b=upstream-b" → ["a", { id: "b", upstream_model: "upstream-b" }] */
function parseModels(text: string): ModelRef[] {
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((s) => {
      const [id, up] = s.split('=');
      return up ? { id, upstream_model: up } : id;
    });
}

/** A number typed by the operator: empty is left out; anything else goes to the API, which judges it. */
const numberOrText = (s: string) => (s.trim() === '' ? undefined : /^-?\d+(\.\d+)?$/.test(s.trim()) ? Number(s) : s);

const blank = { name: '', kind: 'openai-compatible', base_url: '', api_key: '', models: '', priority: '', weight: '', timeout_ms: '' };
type Fields = typeof blank;

const fieldsOf = (u: Upstream): Fields => ({
  name: u.name,
  kind: u.kind,
  base_url: u.base_url,
  api_key: '',
  models: u.models.map((m) => (typeof m === 'string' ? m : `${m.id}=${m.upstream_model}`)).join(', '),
  priority: String(u.priority),
  weight: String(u.weight),
  timeout_ms: u.timeout_ms == null ? '' : String(u.timeout_ms),
});

/** Adds an upstream, or edits one (`editing`): the key field is then empty = keep the key. */
function UpstreamForm({ editing, onDone }: { editing?: Upstream; onDone: () => void }) {
  const [f, setF] = useState<Fields>(editing ? fieldsOf(editing) : blank);
  const [dropKey, setDropKey] = useState(false);
  const [done, setDone] = useState<string | null>(null);
  const act = useAction();
  const p = editing ? `edit-${editing.upstream_id}` : 'new-upstream';
  const { input, invalid } = textInputs(p, f, setF, act.error);
  return (
    <form
      aria-label={editing ? `Edit upstream ${editing.name}` : 'Add an upstream'}
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(null);
        const common = {
          name: f.name,
          kind: f.kind,
          base_url: f.base_url.trim() || undefined,
          models: parseModels(f.models),
          priority: numberOrText(f.priority),
          weight: numberOrText(f.weight),
        };
        const u = await act.run(() =>
          editing
            ? post<Upstream>('ai/upstreams/update', {
                upstream_id: editing.upstream_id,
                ...common,
                timeout_ms: numberOrText(f.timeout_ms) ?? null,
                ...(dropKey ? { api_key: null } : f.api_key ? { api_key: f.api_key } : {}),
              })
            : post<Upstream>('ai/upstreams/create', { ...common, timeout_ms: numberOrText(f.timeout_ms), api_key: f.api_key || undefined }),
        );
        if (u) {
          if (!editing) setF(blank);
          setDone(editing ? `Saved ${u.name}: the next call uses it (its health record starts clean).` : `Added ${u.name} (${u.upstream_id}): it serves calls now.`);
          onDone();
        }
      }}
    >
      <div class="form-grid">
        {input('name', 'Name', { required: true, placeholder: 'e.g. vllm-east' })}
        <div>
          <label for={`${p}-kind`}>Kind</label>
          <select id={`${p}-kind`} value={f.kind} onChange={(e) => setF({ ...f, kind: e.currentTarget.value })}>
            {KINDS.map((k) => <option key={k} value={k}>{k}</option>)}
          </select>
        </div>
        {input('base_url', 'Base URL', { placeholder: f.kind === 'openai-compatible' ? 'https://host/v1 (required)' : 'empty: the provider’s own' })}
        <div>
          <label for={`${p}-api_key`}>API key</label>
          <input
            id={`${p}-api_key`}
            type="password"
            autocomplete="off"
            value={f.api_key}
            disabled={dropKey}
            aria-invalid={invalid('api_key')}
            placeholder={editing ? (editing.has_key ? 'empty: keep the key' : 'none set') : 'write-only: never shown again'}
            onInput={(e) => setF({ ...f, api_key: e.currentTarget.value })}
          />
          {editing?.has_key && (
            <label>
              <input type="checkbox" checked={dropKey} onChange={(e) => setDropKey(e.currentTarget.checked)} /> Remove the key
            </label>
          )}
        </div>
        <div class="wide">
          <label for={`${p}-models`}>Models</label>
          <input id={`${p}-models`} value={f.models} aria-invalid={invalid('models')} aria-describedby={`${p}-models-help`} placeholder="model-a, model-b=its-upstream-name" onInput={(e) => setF({ ...f, models: e.currentTarget.value })} />
          <small id={`${p}-models-help`}>Catalog ids, comma-separated; <code>id=name</code> when the upstream calls it something else.</small>
        </div>
        {input('priority', 'Priority', { inputMode: 'numeric', placeholder: '0 (lower is tried first)' })}
        {input('weight', 'Weight', { inputMode: 'numeric', placeholder: '1 (share within a priority)' })}
        {input('timeout_ms', 'Timeout (ms)', { inputMode: 'numeric', placeholder: 'empty: the default' })}
      </div>
      <button type="submit" class="auto" aria-busy={act.busy} disabled={act.busy}>{editing ? 'Save upstream' : 'Add upstream'}</button>
      <ErrorBox error={act.error} />
      {done && <p class="ok" role="status">{done}</p>}
    </form>
  );
}

export function Upstreams() {
  const up = useLoad(async () => {
    try {
      return { items: (await get<{ items: Upstream[] }>('ai/upstreams/list')).items, at: new Date().toISOString() };
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return null; // a gateway without routing
      throw e;
    }
  }, []);
  // Health changes with traffic: read it again every few seconds while the page is open.
  useEffect(() => {
    const t = setInterval(() => document.visibilityState === 'visible' && up.reload(), REFRESH_MS);
    return () => clearInterval(t);
  }, [up.reload]);
  return (
    <section data-testid="upstreams">
      <header class="page-head">
        <h2>Upstreams</h2>
        <div class="page-actions">
          {up.data && <small class="muted">checked {when(up.data.at)}</small>}
          <button type="button" class="secondary outline small" onClick={up.reload}>Refresh</button>
        </div>
      </header>
      <p>
        <small>
          Each model is routed to the upstreams that list it: the lowest priority first, by weight within one; a failed call is
          retried on the next. The circuit of each (upstream, model) is <strong>closed</strong> while calls succeed,{' '}
          <strong>open</strong> (skipped) after <code>AI_COOLDOWN_FAILURES</code> failures in a row (default 3) or a 429 for{' '}
          <code>AI_COOLDOWN_MS</code> (default 30 s), then <strong>half-open</strong>: one probe call closes it or opens it again.
          Health is what the process that answered has seen; the API reports the state, not a failure count.
        </small>
      </p>
      <Show load={up}>
        {(d) =>
          d === null ? (
            <Empty>This gateway has no upstream routing (<code>ai/upstreams/list</code>): each model calls its provider slot directly.</Empty>
          ) : (
            <>
              {d.items.length === 0 ? (
                <Empty>No upstreams. Set a provider key on the Env page, or add an upstream below.</Empty>
              ) : (
                <div class="table-wrap">
                  <table data-testid="upstreams-table">
                    <thead>
                      <tr><th>Upstream</th><th>Circuit</th><th>Models</th><th>Key</th><th>Routing</th><th>Actions</th></tr>
                    </thead>
                    <tbody>
                      {d.items.map((u) => <Row key={u.upstream_id} u={u} onChange={up.reload} />)}
                    </tbody>
                  </table>
                </div>
              )}
              <details class="add-upstream">
                <summary role="button" class="secondary outline">Add an upstream…</summary>
                <UpstreamForm onDone={up.reload} />
              </details>
            </>
          )
        }
      </Show>
    </section>
  );
}
