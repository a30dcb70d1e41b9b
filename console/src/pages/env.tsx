// Env: the gateway's runtime variables, secrets masked by the gateway itself (env/list never
// sends them unmasked to the console); set one, remove one, import a .env file.
import { useState } from 'preact/hooks';
import { get, post } from '../api.ts';
import { ConfirmButton, Empty, ErrorBox, PageHead, Show, useAction, useLoad } from '../ui.tsx';

interface Entry { key: string; value: string; secret: boolean }
const SECRET = /(_KEY|_SECRET|_TOKEN|_PASSWORD)$/;

function SetForm({ onDone }: { onDone: () => void }) {
  const [key, setKey] = useState('');
  const [value, setValue] = useState('');
  const act = useAction();
  const secret = SECRET.test(key);
  return (
    <form
      onSubmit={async (e) => {
        e.preventDefault();
        if (await act.run(() => post('env/upsert', { key: key.trim(), value }))) {
          setKey('');
          setValue('');
          onDone();
        }
      }}
    >
      <h2>Set a variable</h2>
      <fieldset role="group">
        <input aria-label="Key" placeholder="KEY_NAME" required value={key} onInput={(e) => setKey(e.currentTarget.value.toUpperCase())} />
        {secret ? (
          <input aria-label="Value" placeholder="value (secret)" type="password" autocomplete="off" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        ) : (
          <input aria-label="Value" placeholder="value" type="text" autocomplete="off" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        )}
        <button type="submit" aria-busy={act.busy} disabled={act.busy}>Set</button>
      </fieldset>
      <ErrorBox error={act.error} />
    </form>
  );
}

function ImportForm({ onDone }: { onDone: () => void }) {
  const [content, setContent] = useState('');
  const [done, setDone] = useState<string | null>(null);
  const act = useAction();
  return (
    <form
      onSubmit={async (e) => {
        e.preventDefault();
        const r = await act.run(() => post<{ imported: number; keys: string[] }>('env/import', { content }));
        if (r) {
          setDone(`Imported ${r.imported}: ${r.keys.join(', ')}`);
          setContent('');
          onDone();
        }
      }}
    >
      <h2>Import a .env file</h2>
      <input
        type="file"
        aria-label=".env file"
        accept=".env,text/plain"
        onChange={async (e) => {
          const f = e.currentTarget.files?.[0];
          if (f) setContent(await f.text());
        }}
      />
      <textarea aria-label=".env content" rows={4} placeholder={'KEY=value\n# comments and quotes as in dotenv'} value={content} onInput={(e) => setContent(e.currentTarget.value)} />
      <button type="submit" aria-busy={act.busy} disabled={act.busy || !content.trim()}>Import (all or nothing)</button>
      <ErrorBox error={act.error} />
      {done && <p role="status" class="ok">{done}</p>}
    </form>
  );
}

export function Env() {
  const list = useLoad(() => get<{ items: Entry[] }>('env/list'), []);
  const act = useAction();
  return (
    <>
      <PageHead title="Env" />
      <p><small>Read from the gateway’s env table first, then the process environment. Secret values (<code>*_KEY</code>, <code>*_SECRET</code>, <code>*_TOKEN</code>, <code>*_PASSWORD</code>) arrive masked.</small></p>
      <ErrorBox error={act.error} />
      <Show load={list}>
        {(d) =>
          d.items.length === 0 ? (
            <Empty>No variables in the env table. Set one below, e.g. <code>TEXTPROVIDER_API_KEY</code> to make models callable.</Empty>
          ) : (
            <div class="table-wrap">
              <table class="striped" data-testid="env">
                <thead><tr><th>Key</th><th>Value</th><th /></tr></thead>
                <tbody>
                  {d.items.map((e) => (
                    <tr key={e.key}>
                      <td><code>{e.key}</code></td>
                      <td class="value">{e.secret ? <span class="masked">{e.value}</span> : <code>{e.value}</code>}</td>
                      <td>
                        {e.key !== 'GATEWAY_ADMIN_SECRET_KEY' && (
                          <ConfirmButton label="Remove" class="danger outline" question={`Remove ${e.key}? What depends on it stops working at once.`} onConfirm={() => act.run(async () => (await post('env/remove', { key: e.key }), list.reload()))} />
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Show>
      <SetForm onDone={list.reload} />
      <ImportForm onDone={list.reload} />
    </>
  );
}
