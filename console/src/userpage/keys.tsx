// The user's API keys (accounts/keys/*, MESSAGES.md's key actions): make one (name, models,
// a budget in total or per rolling window, an expiry), see its secret once in a dialog with a
// copy button, list them with each key's spend against its budget, revoke one.
import { useEffect, useRef, useState } from 'preact/hooks';
import { post } from '../api.ts';
import { Badge, ConfirmButton, CopyButton, Empty, ErrorBox, num, Show, useAction, when, type Loaded } from '../ui.tsx';
import { usePoll, type KeyView } from './hooks.ts';

const WINDOWS: Record<string, string> = { '': 'in total', day: 'per day', week: 'per week', '30d': 'per 30 days' };

interface Form {
  name: string;
  models: string;
  credits: string;
  window: string;
  expires: string;
  rpm: string;
  ips: string;
}
const EMPTY: Form = { name: '', models: '', credits: '', window: 'week', expires: '', rpm: '', ips: '' };

export function KeysSection({ keys }: { keys: Loaded<{ items: KeyView[] }> }) {
  const [f, setF] = useState<Form>(EMPTY);
  const details = useRef<HTMLDetailsElement>(null);
  // spend and last use move as the keys are used
  usePoll(keys.reload, 5000);
  const [secret, setSecret] = useState<{ name: string; value: string } | null>(null);
  const act = useAction();
  const invalid = (k: string) => (act.error && (act.error as { param?: string }).param?.split('.')[0] === k ? true : undefined);

  const create = () =>
    act.run(async () => {
      const body: Record<string, unknown> = { name: f.name.trim() };
      const models = f.models.split(/[\s,]+/).filter(Boolean);
      if (models.length) body.models = models;
      if (f.credits.trim()) body.budget = { credits: Number(f.credits), ...(f.window ? { window: f.window } : {}) };
      if (f.expires) body.expires_at = new Date(`${f.expires}T23:59:59Z`).toISOString();
      // typed values go as typed (a number when it is one): the API judges them and names the field
      if (f.rpm.trim()) body.rpm = /^\d+$/.test(f.rpm.trim()) ? Number(f.rpm) : f.rpm;
      const ips = f.ips.split(/[\s,]+/).filter(Boolean);
      if (ips.length) body.allowed_ips = ips;
      const r = await post<{ key: KeyView; secret: string }>('accounts/keys/create', body);
      setSecret({ name: r.key.name, value: r.secret });
      setF(EMPTY);
      if (details.current) details.current.open = false;
      keys.reload();
    });

  return (
    <section class="panel" aria-labelledby="keys-h">
      <h2 id="keys-h">API keys</h2>
      <p class="muted">A key acts as you on the API (OpenAI, Anthropic and Google clients, Claude Code, Codex, Cursor), within the limits you give it. Paste it once into your tool.</p>
      <details class="new-key" ref={details}>
        <summary role="button" class="secondary outline">New key…</summary>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            create();
          }}
        >
          <div class="form-grid">
            <div>
              <label for="key-name">Name</label>
              <input id="key-name" required maxLength={200} placeholder="laptop claude" value={f.name} aria-invalid={invalid('name')} onInput={(e) => setF({ ...f, name: e.currentTarget.value })} />
            </div>
            <div>
              <label for="key-models">Models (optional)</label>
              <input id="key-models" placeholder="empty: every model" value={f.models} aria-invalid={invalid('models')} onInput={(e) => setF({ ...f, models: e.currentTarget.value })} />
              <small class="muted">ids or aliases, separated by commas</small>
            </div>
            <div>
              <label for="key-budget">Budget in credits (optional)</label>
              <input id="key-budget" type="number" min="1" step="1" placeholder="no budget" value={f.credits} aria-invalid={invalid('budget')} onInput={(e) => setF({ ...f, credits: e.currentTarget.value })} />
            </div>
            <div>
              <label for="key-window">Budget period</label>
              <select id="key-window" value={f.window} onChange={(e) => setF({ ...f, window: e.currentTarget.value })}>
                {Object.entries(WINDOWS).map(([v, l]) => (
                  <option key={v} value={v}>
                    {l}
                  </option>
                ))}
              </select>
            </div>
            <div>
              <label for="key-expires">Expires (optional)</label>
              <input id="key-expires" type="date" value={f.expires} aria-invalid={invalid('expires_at')} onInput={(e) => setF({ ...f, expires: e.currentTarget.value })} />
            </div>
            <div>
              <label for="key-rpm">Requests per minute (optional)</label>
              <input id="key-rpm" inputMode="numeric" placeholder="no limit" value={f.rpm} aria-invalid={invalid('rpm')} onInput={(e) => setF({ ...f, rpm: e.currentTarget.value })} />
            </div>
            <div>
              <label for="key-ips">Allowed IPs (optional)</label>
              <input id="key-ips" placeholder="any address" value={f.ips} aria-invalid={invalid('allowed_ips')} onInput={(e) => setF({ ...f, ips: e.currentTarget.value })} />
              <small class="muted">addresses or CIDRs, separated by commas</small>
            </div>
          </div>
          <ErrorBox error={act.error} />
          <button type="submit" class="auto" aria-busy={act.busy} disabled={act.busy}>
            Create key
          </button>
        </form>
      </details>
      {secret && <SecretDialog name={secret.name} value={secret.value} onClose={() => setSecret(null)} />}
      <Show load={keys}>{(d) => (d.items.length ? <KeyList items={d.items} reload={keys.reload} /> : <Empty>No keys yet.</Empty>)}</Show>
    </section>
  );
}

/** The new key's secret, shown once: a modal with the value selectable and a copy button; closing it forgets the value. */
function SecretDialog({ name, value, onClose }: { name: string; value: string; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    dialog.current?.showModal();
  }, []);
  return (
    <dialog ref={dialog} class="secret-dialog" aria-labelledby="secret-h" onClose={onClose}>
      <article>
        <h3 id="secret-h">Your new key “{name}”</h3>
        <p>Copy it now: this is the only time it is shown. citygate keeps no readable copy.</p>
        <div class="secret-row">
          <textarea readOnly rows={2} aria-label="The new key" data-testid="new-key-secret" value={value} onFocus={(e) => e.currentTarget.select()} />
          <CopyButton text={value} />
        </div>
        <p class="muted base-url">
          Base URL for OpenAI and Anthropic clients (Claude Code's <code>ANTHROPIC_BASE_URL</code>, Codex, Cursor): <code>{`${location.origin}/v1/ai`}</code>
        </p>
        <footer>
          <button type="button" onClick={() => dialog.current?.close()}>
            I have copied it
          </button>
        </footer>
      </article>
    </dialog>
  );
}

function Spend({ k }: { k: KeyView }) {
  const spent = k.spent?.credits ?? 0;
  if (!k.budget) return <span>{num(spent)} spent</span>;
  const pct = Math.min(100, Math.round((spent / k.budget.credits) * 100));
  return (
    <div class="spend">
      <progress value={Math.min(spent, k.budget.credits)} max={k.budget.credits} aria-label={`${k.name}: ${pct} % of its budget`} />
      <small>
        {num(spent)} / {num(k.budget.credits)} {WINDOWS[k.budget.window ?? '']}
        {k.spent?.resets_at ? ` · resets ${when(k.spent.resets_at)}` : ''}
      </small>
    </div>
  );
}

function KeyList({ items, reload }: { items: KeyView[]; reload: () => void }) {
  const act = useAction();
  return (
    <>
      <ErrorBox error={act.error} />
      <ul class="key-list" data-testid="key-list">
        {items.map((k) => (
          <li key={k.id} data-key={k.id} class={`key key-${k.status}`}>
            <div class="key-head">
              <strong class="key-name">{k.name}</strong> <Badge status={k.status} />
            </div>
            <code class="key-prefix">{k.prefix}_…</code>
            <div class="key-facts">
              <span>Models: {k.models?.length ? k.models.join(', ') : 'all'}</span>
              {k.rpm != null && <span>{num(k.rpm)} requests / min</span>}
              {k.allowed_ips?.length ? <span>From: {k.allowed_ips.join(', ')}</span> : null}
              <span>Last used: {when(k.last_used_at)}</span>
              {k.expires_at && <span>Expires: {when(k.expires_at)}</span>}
              <span>Made: {when(k.created_at)}</span>
            </div>
            <Spend k={k} />
            {k.status === 'active' && (
              <ConfirmButton
                label="Revoke"
                class="danger outline small"
                question={`Revoke the key “${k.name}”? Tools using it stop working within seconds. This cannot be undone.`}
                onConfirm={() => act.run(async () => (await post('accounts/keys/revoke', { id: k.id }), reload()))}
              />
            )}
          </li>
        ))}
      </ul>
    </>
  );
}
