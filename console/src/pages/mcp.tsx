// Tools (MCP): a city's upstream MCP servers. Add one (its credentials are sealed and never
// shown again), test it (connect, list its tools: which the city's users see, at what price),
// set prices per call and per tool, enable, disable, remove; and follow the tool calls of the
// city's users (usage records of mode 'mcp').
import { useState } from 'preact/hooks';
import { get, post, type Page, type UsageRecord } from '../api.ts';
import { useWho } from '../app.tsx';
import { useCities } from '../cities.ts';
import { go } from '../router.ts';
import { Badge, ConfirmButton, Empty, ErrorBox, PageHead, Show, invalidIn, ms, num, useAction, useLoad, when } from '../ui.tsx';

interface Server {
  server_id: string; city_id: string; name: string; url: string; description: string;
  auth: { type: 'none' | 'headers' | 'oauth'; header_names?: string[]; token_url?: string; client_id?: string; scope?: string };
  allowed_tools: string[] | null; denied_tools: string[] | null; price: number; prices: Record<string, number>; timeout_ms: number; enabled: boolean; created_at: string;
}
interface Tested { ok: boolean; latency_ms: number; server_info: { name: string; version: string } | null; protocol_version: string | null; error: string | null; tools: { name: string; exposed_as: string; description: string | null; allowed: boolean; price: number }[] }

const list = (s: string) => s.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);

function AddServer({ city, onAdded }: { city: string; onAdded: () => void }) {
  const empty = { name: '', url: '', auth: 'none', headers: '', token_url: '', client_id: '', client_secret: '', scope: '', filter: 'all', tools: '', price: '0', timeout_ms: '30000' };
  const [f, setF] = useState(empty);
  const act = useAction();
  const invalid = invalidIn(act.error);
  const set = (k: keyof typeof empty) => (e: { currentTarget: { value: string } }) => setF({ ...f, [k]: e.currentTarget.value });
  return (
    <form
      class="mcp-add"
      aria-label="Add an MCP server"
      onSubmit={async (ev) => {
        ev.preventDefault();
        const headers = Object.fromEntries(f.headers.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => [l.slice(0, l.indexOf(':')).trim(), l.slice(l.indexOf(':') + 1).trim()]));
        const auth =
          f.auth === 'headers' ? { type: 'headers', headers } : f.auth === 'oauth' ? { type: 'oauth', token_url: f.token_url, client_id: f.client_id, client_secret: f.client_secret, ...(f.scope ? { scope: f.scope } : {}) } : { type: 'none' };
        const r = await act.run(() =>
          post<Server>('mcp/servers/create', {
            city_id: city,
            name: f.name.trim(),
            url: f.url.trim(),
            auth,
            ...(f.filter === 'allow' ? { allowed_tools: list(f.tools) } : f.filter === 'deny' ? { denied_tools: list(f.tools) } : {}),
            price: Number(f.price),
            timeout_ms: Number(f.timeout_ms),
          }),
        );
        if (r) {
          setF(empty);
          onAdded();
        }
      }}
    >
      <div class="grid">
        <div><label for="mcp-name">Name</label><input id="mcp-name" required placeholder="search" value={f.name} aria-invalid={invalid('name')} onInput={set('name')} /><small>tools are named name__tool</small></div>
        <div><label for="mcp-url">URL (Streamable HTTP)</label><input id="mcp-url" type="url" required placeholder="https://tools.example.com/mcp" value={f.url} aria-invalid={invalid('url')} onInput={set('url')} /></div>
      </div>
      <div class="grid">
        <div>
          <label for="mcp-auth">Auth</label>
          <select id="mcp-auth" value={f.auth} onChange={set('auth')}>
            <option value="none">none</option>
            <option value="headers">static headers</option>
            <option value="oauth">OAuth client credentials</option>
          </select>
        </div>
        <div><label for="mcp-price">Credits per call</label><input id="mcp-price" type="number" min="0" step="1" value={f.price} aria-invalid={invalid('price')} onInput={set('price')} /></div>
        <div><label for="mcp-timeout">Timeout (ms)</label><input id="mcp-timeout" type="number" min="100" step="100" value={f.timeout_ms} aria-invalid={invalid('timeout_ms')} onInput={set('timeout_ms')} /></div>
      </div>
      {f.auth === 'headers' && (
        <div><label for="mcp-headers">Headers, one per line (sealed at rest, never shown again)</label><textarea id="mcp-headers" rows={2} placeholder="Authorization: Bearer …" value={f.headers} aria-invalid={invalid('auth')} onInput={set('headers')} /></div>
      )}
      {f.auth === 'oauth' && (
        <div class="grid">
          <div><label for="mcp-token-url">Token URL</label><input id="mcp-token-url" type="url" required value={f.token_url} aria-invalid={invalid('auth')} onInput={set('token_url')} /></div>
          <div><label for="mcp-client-id">Client id</label><input id="mcp-client-id" required value={f.client_id} onInput={set('client_id')} /></div>
          <div><label for="mcp-client-secret">Client secret</label><input id="mcp-client-secret" type="password" required autocomplete="off" value={f.client_secret} onInput={set('client_secret')} /></div>
          <div><label for="mcp-scope">Scope</label><input id="mcp-scope" value={f.scope} onInput={set('scope')} /></div>
        </div>
      )}
      <div class="grid">
        <div>
          <label for="mcp-filter">Tools</label>
          <select id="mcp-filter" value={f.filter} onChange={set('filter')}>
            <option value="all">all tools</option>
            <option value="allow">only these (allow-list)</option>
            <option value="deny">all but these (deny-list)</option>
          </select>
        </div>
        {f.filter !== 'all' && <div><label for="mcp-tools">Tool names (comma-separated)</label><input id="mcp-tools" value={f.tools} aria-invalid={invalid('allowed_tools') || invalid('denied_tools')} onInput={set('tools')} /></div>}
      </div>
      <button type="submit" aria-busy={act.busy} disabled={act.busy}>Add server</button>
      <ErrorBox error={act.error} />
    </form>
  );
}

/** The test's report: the server's tools, which are offered, and a price per tool to set. */
function ToolsOf({ server, tested, onSaved }: { server: Server; tested: Tested; onSaved: () => void }) {
  const [prices, setPrices] = useState<Record<string, string>>(Object.fromEntries(Object.entries(server.prices).map(([k, v]) => [k, String(v)])));
  const act = useAction();
  const [saved, setSaved] = useState(false);
  return (
    <section class="mcp-tools" aria-label={`Tools of ${server.name}`}>
      <header class="page-head">
        <h2>Tools of {server.name}</h2>
        <small>
          {tested.ok ? <><Badge status="ok" /> {tested.server_info?.name} {tested.server_info?.version} · protocol {tested.protocol_version} · {ms(tested.latency_ms)}</> : <><Badge status="failed" /> {tested.error}</>}
        </small>
      </header>
      {tested.ok && (
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setSaved(false);
            const p = Object.fromEntries(Object.entries(prices).filter(([, v]) => v.trim() !== '').map(([k, v]) => [k, Number(v)]));
            if (await act.run(() => post('mcp/servers/update', { server_id: server.server_id, prices: p }))) {
              setSaved(true);
              onSaved();
            }
          }}
        >
          <div class="table-wrap">
            <table class="striped">
              <thead><tr><th>Tool</th><th>Users see it as</th><th>Offered</th><th>Credits per call</th></tr></thead>
              <tbody>
                {tested.tools.map((t) => (
                  <tr key={t.name} data-tool={t.name}>
                    <td><strong>{t.name}</strong>{t.description && <><br /><small>{t.description}</small></>}</td>
                    <td><code>{t.exposed_as}</code></td>
                    <td><Badge status={t.allowed ? 'active' : 'disabled'} /></td>
                    <td><input aria-label={`Price of ${t.name}`} style={{ minWidth: "6rem" }} type="number" min="0" step="1" placeholder={String(server.price)} value={prices[t.name] ?? ''} onInput={(e) => setPrices({ ...prices, [t.name]: e.currentTarget.value })} /></td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <button type="submit" aria-busy={act.busy} disabled={act.busy}>Save tool prices</button>
          {saved && <small role="status"> Saved.</small>}
          <ErrorBox error={act.error} />
        </form>
      )}
    </section>
  );
}

/** The city's tool calls: totals per tool and the latest calls. */
function ToolUsage({ city }: { city: string }) {
  const usage = useLoad(() => get<Page<UsageRecord & { upstream?: string | null }>>('usage/list', { city_id: city, mode: 'mcp', limit: 200 }), [city]);
  return (
    <section class="mcp-usage" aria-label="Tool usage">
      <header class="page-head">
        <h2>Tool usage</h2>
        <div class="page-actions"><button type="button" class="secondary outline" onClick={() => usage.reload()}>Refresh</button></div>
      </header>
      <Show load={usage}>
        {(d) => {
          if (d.items.length === 0) return <Empty>No tool calls yet. Users add citygate as an MCP server at /v1/mcp (docs/mcp.md).</Empty>;
          const byTool = new Map<string, { calls: number; errors: number; credits: number; ms: number }>();
          for (const r of d.items) {
            const t = byTool.get(r.model) ?? { calls: 0, errors: 0, credits: 0, ms: 0 };
            t.calls++;
            if (r.status !== 'ok') t.errors++;
            t.credits += r.credits;
            t.ms += r.duration_ms;
            byTool.set(r.model, t);
          }
          return (
            <>
              <p><small>The latest {d.items.length} calls.</small></p>
              <div class="table-wrap">
                <table class="striped" data-testid="mcp-usage-totals">
                  <thead><tr><th>Tool</th><th>Calls</th><th>Errors</th><th>Credits</th><th>Mean latency</th></tr></thead>
                  <tbody>
                    {[...byTool].map(([tool, t]) => (
                      <tr key={tool}><td><code>{tool}</code></td><td>{num(t.calls)}</td><td>{num(t.errors)}</td><td>{num(t.credits)}</td><td>{ms(t.ms / t.calls)}</td></tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <div class="table-wrap">
                <table>
                  <thead><tr><th>When</th><th>User</th><th>Tool</th><th>Status</th><th>Credits</th><th>Latency</th></tr></thead>
                  <tbody>
                    {d.items.slice(0, 25).map((r) => (
                      <tr key={r.usage_id}><td>{when(r.created_at)}</td><td>{r.user_id}</td><td><code>{r.model}</code></td><td><Badge status={r.status} />{r.error_code && <small> {r.error_code}</small>}</td><td>{num(r.credits)}</td><td>{ms(r.duration_ms)}</td></tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </>
          );
        }}
      </Show>
    </section>
  );
}

export function Mcp({ params }: { params: URLSearchParams }) {
  const who = useWho();
  const cities = useCities();
  const city = params.get('city') || (who.kind === 'bureau' ? who.city?.city_id : cities.data?.[0]?.city_id) || '';
  const servers = useLoad(() => (city ? get<{ items: Server[] }>('mcp/servers/list', { city_id: city }) : Promise.resolve({ items: [] })), [city]);
  const [tested, setTested] = useState<{ server: string; report: Tested } | null>(null);
  const act = useAction();
  const options = (cities.data ?? []).map((c) => c.city_id);
  const test = (s: Server) => act.run(async () => setTested({ server: s.server_id, report: await post<Tested>('mcp/servers/test', { server_id: s.server_id }) }));
  const current = tested && servers.data?.items.find((s) => s.server_id === tested.server);
  return (
    <>
      <PageHead title="Tools (MCP)">
        {options.length > 1 && (
          <select aria-label="City" value={city} onChange={(e) => go('mcp', { city: e.currentTarget.value })}>
            {options.map((c) => <option key={c} value={c}>{c}</option>)}
          </select>
        )}
      </PageHead>
      <p><small>The MCP servers whose tools the users of <strong>{city}</strong> get at <code>/v1/mcp</code> with their own token or key, charged per call from their balance. Upstream credentials stay in citygate.</small></p>
      {city && <AddServer city={city} onAdded={servers.reload} />}
      <ErrorBox error={act.error} />
      <Show load={servers}>
        {(d) =>
          d.items.length === 0 ? (
            <Empty>No MCP servers for this city yet.</Empty>
          ) : (
            <div class="table-wrap">
              <table>
                <thead><tr><th>Server</th><th>Auth</th><th>Tools</th><th>Price</th><th>Status</th><th>Actions</th></tr></thead>
                <tbody>
                  {d.items.map((s) => (
                    <tr key={s.server_id} data-server={s.name} class={tested?.server === s.server_id ? 'selected' : ''}>
                      <td><strong>{s.name}</strong><br /><code>{s.url}</code><br /><small>{s.server_id} · timeout {num(s.timeout_ms)} ms</small></td>
                      <td><small>{s.auth.type === 'headers' ? `headers: ${s.auth.header_names?.join(', ')}` : s.auth.type === 'oauth' ? `OAuth ${s.auth.client_id}` : 'none'}</small></td>
                      <td><small>{s.allowed_tools ? `only ${s.allowed_tools.join(', ')}` : s.denied_tools ? `all but ${s.denied_tools.join(', ')}` : 'all'}</small></td>
                      <td>{num(s.price)}{Object.keys(s.prices).length > 0 && <small><br />{Object.keys(s.prices).length} per-tool</small>}</td>
                      <td><Badge status={s.enabled ? 'active' : 'disabled'} /></td>
                      <td>
                        <div class="actions-row">
                          <button type="button" class="secondary outline" disabled={act.busy} onClick={() => test(s)}>Test</button>
                          <button type="button" class="secondary outline" disabled={act.busy} onClick={() => act.run(async () => (await post('mcp/servers/update', { server_id: s.server_id, enabled: !s.enabled }), servers.reload()))}>{s.enabled ? 'Disable' : 'Enable'}</button>
                          <ConfirmButton label="Remove" class="danger outline" question={`Remove the MCP server ${s.name}? Its tools disappear for the city's users.`} onConfirm={() => act.run(async () => (await post('mcp/servers/remove', { server_id: s.server_id }), setTested(null), servers.reload()))} />
                        </div>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Show>
      {tested && current && <ToolsOf key={tested.server} server={current} tested={tested.report} onSaved={servers.reload} />}
      {city && <ToolUsage city={city} />}
    </>
  );
}
