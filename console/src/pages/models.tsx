// Models: the catalog with prices, modes and what each needs. The admin sees every model
// (ai/models/list: built-in and database ones, disabled ones too) and adds, edits, disables and
// removes database models, with their aliases and prices; built-in ones are read-only (a
// database model of the same id replaces one). Upstreams and their health below.
import { useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { useWho } from '../app.tsx';
import { href } from '../router.ts';
import { Badge, ConfirmButton, Empty, ErrorBox, num, PageHead, Show, useAction, useLoad } from '../ui.tsx';
import { ModelForm, PRICE_FIELDS, type AdminModel } from './model-form.tsx';
import { Upstreams } from './upstreams.tsx';

interface Model {
  id: string; name: string; description: string; modalities: string[]; tags: string[]; aliases?: string[];
  price?: Record<string, number> | null;
}

const PRICE_LABELS: Record<string, string> = Object.fromEntries(PRICE_FIELDS.map((p) => [p.key, p.label.toLowerCase()]));

function Price({ p }: { p: Record<string, number> | null | undefined }) {
  if (!p) return <small class="warn">free (no price)</small>;
  return <>{Object.entries(p).map(([k, v]) => <div key={k}><small>{num(v)} {PRICE_LABELS[k] ?? k}</small></div>)}</>;
}

function AdminRow({ m, onChange }: { m: AdminModel; onChange: () => void }) {
  const act = useAction();
  const [editing, setEditing] = useState(false);
  const db = m.source === 'database';
  const update = (patch: Record<string, unknown>) => act.run(async () => (await post('ai/models/update', { model_id: m.model_id, ...patch }), onChange()));
  return (
    <>
      <tr data-model={m.model_id}>
        <td>
          <strong>{m.model_id}</strong>
          {m.name !== m.model_id && <div><small>{m.name}</small></div>}
          <div><small class="muted">{m.provider ? `${m.provider} → ` : ''}{m.upstream_model}</small></div>
          {m.aliases.length > 0 && <div><small>aliases: {m.aliases.map((a) => <code key={a}>{a} </code>)}</small></div>}
        </td>
        <td>{m.modes.join(', ') || '—'}</td>
        <td>
          <Badge status={!m.enabled ? 'disabled' : m.available ? 'callable' : 'missing-key'} />
          <div><small class="muted">{db ? (m.replaces_builtin ? 'database (replaces built-in)' : 'database') : 'built-in'}</small></div>
          {m.enabled && !m.available && (m.env_requirements ?? []).some((r) => r.required) && (
            <div><small>needs {(m.env_requirements ?? []).filter((r) => r.required).map((r) => <code key={r.key}>{r.key} </code>)}or an upstream</small></div>
          )}
        </td>
        <td data-testid="price"><Price p={m.prices} /></td>
        <td>
          <div class="actions-row">
            {db ? (
              <>
                <button type="button" class="secondary outline" aria-expanded={editing} onClick={() => setEditing(!editing)}>Edit…</button>
                <button type="button" class="secondary outline" disabled={act.busy} onClick={() => update({ enabled: !m.enabled })}>{m.enabled ? 'Disable' : 'Enable'}</button>
                <ConfirmButton
                  label="Remove"
                  class="danger outline"
                  question={m.replaces_builtin ? `Remove model ${m.model_id}? The built-in model of that id comes back.` : `Remove model ${m.model_id}? Calls to it and its aliases get 404.`}
                  onConfirm={() => act.run(async () => (await post('ai/models/remove', { model_id: m.model_id }), onChange()))}
                />
              </>
            ) : (
              <button type="button" class="secondary outline" aria-expanded={editing} onClick={() => setEditing(!editing)} title="A database model of the same id replaces the built-in one">
                Override…
              </button>
            )}
          </div>
        </td>
      </tr>
      {(act.error != null || editing) && (
        <tr class="sub">
          <td colSpan={5}>
            <ErrorBox error={act.error} />
            {editing && (db ? <ModelForm editing={m} onDone={onChange} /> : <ModelForm base={m} onDone={onChange} />)}
          </td>
        </tr>
      )}
    </>
  );
}

function AdminModels() {
  const models = useLoad(() => get<{ items: AdminModel[] }>('ai/models/list'), []);
  return (
    <>
      <Show load={models}>
        {(d) => (
          <div class="table-wrap">
            <table class="striped" data-testid="models">
              <thead>
                <tr><th>Model</th><th>Modes</th><th>Status</th><th>Base price (credits)</th><th>Actions</th></tr>
              </thead>
              <tbody>
                {d.items.map((m) => <AdminRow key={m.model_id} m={m} onChange={models.reload} />)}
              </tbody>
            </table>
          </div>
        )}
      </Show>
      <details class="add-model">
        <summary role="button" class="secondary outline">Add a model…</summary>
        <ModelForm onDone={models.reload} />
      </details>
      <p>
        <small>
          A model is served by the upstreams that list it (below) or by the env slot it names. Cities may narrow the list and set
          their own prices on the <a href={href('cities')}>Cities</a> page. <code>MODEL_PRICES</code> / <code>MODEL_MODES</code> on the{' '}
          <a href={href('env')}>Env</a> page still apply.
        </small>
      </p>
    </>
  );
}

/** A bureau's view: the models its city may call, at its city's prices. */
function CityModels() {
  const models = useLoad(() => get<{ items: Model[] }>('ai/models'), []);
  return (
    <Show load={models}>
      {(d) =>
        d.items.length === 0 ? (
          <Empty>No models are callable. The admin sets provider keys and upstreams.</Empty>
        ) : (
          <div class="table-wrap">
            <table class="striped" data-testid="models">
              <thead><tr><th>Model</th><th>Modes</th><th>Price (credits)</th></tr></thead>
              <tbody>
                {d.items.map((m) => (
                  <tr key={m.id}>
                    <td><strong>{m.id}</strong>{m.name !== m.id && <div><small>{m.name}</small></div>}</td>
                    <td>{m.modalities.join(', ') || '—'}</td>
                    <td><Price p={m.price} /></td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )
      }
    </Show>
  );
}

export function Models() {
  const who = useWho();
  return (
    <>
      <PageHead title="Models" />
      {who.kind === 'admin' ? <AdminModels /> : <CityModels />}
      {who.kind === 'admin' && <Upstreams />}
    </>
  );
}
