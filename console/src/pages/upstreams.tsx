// Upstreams on the Models page (admin): where each model is routed, the circuit state of each
// (upstream, model) in the process that answered, and adding, disabling and removing
// upstreams. The API key is write-only: the list shows whether one is set and its last 4.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, get, post } from '../api.ts';
import { href } from '../router.ts';
import { Badge, ConfirmButton, Empty, ErrorBox, Show, useAction, useLoad, when } from '../ui.tsx';

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
      {act.error != null && (
        <tr class="sub"><td colSpan={6}><ErrorBox error={act.error} /></td></tr>
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

function AddUpstream({ onAdded }: { onAdded: () => void }) {
  const blank = { name: '', kind: 'openai-compatible', base_url: '', api_key: '', models: '', priority: '', weight: '' };
  const [f, setF] = useState(blank);
  const [added, setAdded] = useState<string | null>(null);
  const act = useAction();
  const field = (k: keyof typeof blank) => ({ value: f[k], onInput: (e: { currentTarget: HTMLInputElement }) => setF({ ...f, [k]: e.currentTarget.value }) });
  const invalid = (p: string) => (act.error instanceof ApiError && act.error.param?.split('.')[0] === p ? true : undefined);
  return (
    <details class="add-upstream">
      <summary role="button" class="secondary outline">Add an upstream…</summary>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setAdded(null);
          const body = {
            name: f.name,
            kind: f.kind,
            base_url: f.base_url.trim() || undefined,
            api_key: f.api_key || undefined,
            models: parseModels(f.models),
            priority: numberOrText(f.priority),
            weight: numberOrText(f.weight),
          };
          const u = await act.run(() => post<Upstream>('ai/upstreams/create', body));
          if (u) {
            setF(blank);
            setAdded(`Added ${u.name} (${u.upstream_id}): it serves calls now.`);
            onAdded();
          }
        }}
      >
        <div class="form-grid">
          <label>Name<input required {...field('name')} aria-invalid={invalid('name')} placeholder="e.g. vllm-east" /></label>
          <label>
            Kind
            <select value={f.kind} onChange={(e) => setF({ ...f, kind: e.currentTarget.value })}>
              {KINDS.map((k) => <option key={k} value={k}>{k}</option>)}
            </select>
          </label>
          <label>Base URL<input {...field('base_url')} aria-invalid={invalid('base_url')} placeholder={f.kind === 'openai-compatible' ? 'https://host/v1 (required)' : 'empty: the provider’s own'} /></label>
          <label>API key<input type="password" autocomplete="off" {...field('api_key')} aria-invalid={invalid('api_key')} placeholder="write-only: never shown again" /></label>
          <div class="wide">
            <label for="new-upstream-models">Models</label>
            <input id="new-upstream-models" {...field('models')} aria-invalid={invalid('models')} aria-describedby="new-upstream-models-help" placeholder="model-a, model-b=its-upstream-name" />
            <small id="new-upstream-models-help">Catalog ids, comma-separated; <code>id=name</code> when the upstream calls it something else.</small>
          </div>
          <label>Priority<input inputMode="numeric" {...field('priority')} aria-invalid={invalid('priority')} placeholder="0 (lower is tried first)" /></label>
          <label>Weight<input inputMode="numeric" {...field('weight')} aria-invalid={invalid('weight')} placeholder="1 (share within a priority)" /></label>
        </div>
        <button type="submit" aria-busy={act.busy} disabled={act.busy}>Add upstream</button>
        <ErrorBox error={act.error} />
        {added && <p class="ok" role="status">{added}</p>}
      </form>
    </details>
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
              <AddUpstream onAdded={up.reload} />
            </>
          )
        }
      </Show>
    </section>
  );
}
