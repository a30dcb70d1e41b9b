// Models: the catalog with prices, modes and what each needs (the admin view lists every
// registered model with its env requirements); upstreams and their health for the admin.
import { get } from '../api.ts';
import { useWho } from '../app.tsx';
import { href } from '../router.ts';
import { Badge, Empty, num, PageHead, Show, useLoad } from '../ui.tsx';
import { Upstreams } from './upstreams.tsx';

interface Model {
  id: string; name: string; description: string; modalities: string[]; tags: string[];
  env_requirements?: { key: string; description: string; required: boolean }[]; default_modes?: string[];
  price?: Record<string, number> | null; available?: boolean; provider?: string; upstream?: string;
}

const PRICE_LABELS: Record<string, string> = {
  input_per_mtok: 'in / 1M tok', output_per_mtok: 'out / 1M tok', cached_per_mtok: 'cached / 1M tok', per_image: 'per image', per_second: 'per second', per_request: 'per request',
};

export function Models() {
  const who = useWho();
  const models = useLoad(() => get<{ items: Model[] }>('ai/models'), []);
  return (
    <>
      <PageHead title="Models" />
      <Show load={models}>
        {(d) =>
          d.items.length === 0 ? (
            <Empty>No models {who.kind === 'admin' ? 'are registered' : 'are callable'}. {who.kind === 'admin' ? '' : 'The admin sets provider keys on the Env page.'}</Empty>
          ) : (
            <div class="table-wrap">
              <table class="striped" data-testid="models">
                <thead>
                  <tr><th>Model</th><th>Modes</th>{who.kind === 'admin' && <><th>Status</th><th>Price (credits)</th><th>Needs</th></>}</tr>
                </thead>
                <tbody>
                  {d.items.map((m) => (
                    <tr key={m.id}>
                      <td>
                        <strong>{m.id}</strong>
                        {m.name !== m.id && <div><small>{m.name}</small></div>}
                        {m.provider && <div><small class="muted">{m.provider} → {m.upstream}</small></div>}
                      </td>
                      <td>
                        {m.modalities.join(', ') || '—'}
                        {m.default_modes && m.default_modes.join(',') !== m.modalities.join(',') && <div><small class="muted">registered: {m.default_modes.join(', ')}</small></div>}
                      </td>
                      {who.kind === 'admin' && (
                        <>
                          <td><Badge status={m.available ? 'callable' : 'missing-key'} /></td>
                          <td>
                            {m.price ? Object.entries(m.price).map(([k, v]) => <div key={k}><small>{num(v)} {PRICE_LABELS[k] ?? k}</small></div>) : <small class="warn">free (no price)</small>}
                          </td>
                          <td>
                            {(m.env_requirements ?? []).map((r) => (
                              <div key={r.key}><code>{r.key}</code>{r.required ? '' : <small> (optional)</small>}</div>
                            ))}
                          </td>
                        </>
                      )}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Show>
      {who.kind === 'admin' && <p><small>Set keys and <code>MODEL_PRICES</code> / <code>MODEL_MODES</code> on the <a href={href('env')}>Env</a> page; they take effect at once.</small></p>}
      {who.kind === 'admin' && <Upstreams />}
    </>
  );
}

