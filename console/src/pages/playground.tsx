// Playground: chat with a model as a chosen user of a city. The console issues a user token
// for that user (cities/tokens/apply) and streams /v1/ai/chat/completions with it, exactly as
// a product would; it shows the answer, the tokens, the credits charged (the call's usage
// record) and citygate's overhead (the x-citygate-overhead-ms header).
import { useRef, useState } from 'preact/hooks';
import { ApiError, get, post, request, type Page, type UsageRecord } from '../api.ts';
import { useCities } from '../cities.ts';
import { href } from '../router.ts';
import { Empty, ErrorBox, Loading, ms, num, PageHead, useLoad } from '../ui.tsx';

interface Model { id: string; name: string; modalities: string[]; available?: boolean }
interface Result { requestId: string | null; overhead: string | null; usage: { prompt_tokens: number; completion_tokens: number } | null; record: UsageRecord | null; recordMissing?: boolean }

/** The data of each server-sent event in a chunk stream. */
async function* sse(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
      if (data) yield data;
    }
  }
}

export function Playground() {
  const cities = useCities();
  const [city, setCity] = useState('');
  const [user, setUser] = useState('playground');
  const [model, setModel] = useState('');
  const [prompt, setPrompt] = useState('Say hello in five words.');
  const [answer, setAnswer] = useState('');
  const [result, setResult] = useState<Result | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const abort = useRef<AbortController | null>(null);
  const models = useLoad(() => get<{ items: Model[] }>('ai/models'), []);

  const cityId = city || cities.data?.[0]?.city_id || '';
  const chatModels = (models.data?.items ?? []).filter((m) => m.modalities.includes('compat') && m.available !== false);
  const modelId = model || chatModels[0]?.id || '';

  const send = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setAnswer('');
    setResult(null);
    const ac = new AbortController();
    abort.current = ac;
    try {
      // A fresh token for this user each time: pausing or removing the city shows at once.
      const { user_token } = await post<{ user_token: string }>('cities/tokens/apply', { city_id: cityId, user_id: user.trim() });
      const res = await request('POST', 'ai/chat/completions', {
        token: user_token,
        signal: ac.signal,
        body: { model: modelId, messages: [{ role: 'user', content: prompt }], stream: true, stream_options: { include_usage: true } },
      });
      const r: Result = { requestId: res.headers.get('x-request-id'), overhead: res.headers.get('x-citygate-overhead-ms'), usage: null, record: null };
      setResult({ ...r });
      let text = '';
      for await (const data of sse(res.body!)) {
        if (data === '[DONE]') break;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ApiError(502, chunk.error.code ?? 'upstream_error', chunk.error.message ?? 'The stream failed.');
        const delta = chunk.choices?.[0]?.delta?.content;
        if (delta) setAnswer((text += delta));
        if (chunk.usage) r.usage = chunk.usage;
      }
      setResult({ ...r });
      // The usage record (credits charged) is written just after the call: look for it briefly.
      for (let i = 0; i < 20 && r.requestId; i++) {
        const page = await get<Page<UsageRecord>>('usage/list', { city_id: cityId, user_id: user.trim(), limit: 10 });
        const rec = page.items.find((u) => u.request_id === r.requestId);
        if (rec) {
          r.record = rec;
          break;
        }
        await new Promise((ok) => setTimeout(ok, 250));
      }
      setResult({ ...r, recordMissing: !r.record });
    } catch (x) {
      if ((x as Error).name !== 'AbortError') setError(x);
    } finally {
      setBusy(false);
      abort.current = null;
    }
  };

  if (cities.error) return <ErrorBox error={cities.error} />;
  if (!cities.data || !models.data) return models.error ? <ErrorBox error={models.error} /> : <Loading />;
  if (cities.data.length === 0) return <Empty>No cities yet: <a href={href('cities')}>create a city</a>, then come back to try a model as one of its users.</Empty>;

  return (
    <>
      <PageHead title="Playground" />
      {chatModels.length === 0 && (
        <Empty>
          No chat model is callable: set a provider key on the <a href={href('env')}>Env</a> page (e.g. <code>TEXTPROVIDER_API_KEY</code>), see <a href={href('models')}>Models</a>.
        </Empty>
      )}
      <form class="playground" onSubmit={send}>
        <div class="grid">
          <label>
            City
            <select name="city" value={cityId} onChange={(e) => setCity(e.currentTarget.value)}>
              {cities.data.map((c) => (
                <option key={c.city_id} value={c.city_id}>{c.name} ({c.city_id}){c.status === 'paused' ? ' · paused' : ''}</option>
              ))}
            </select>
          </label>
          <label>
            As user
            <input name="user" required value={user} onInput={(e) => setUser(e.currentTarget.value)} />
          </label>
          <label>
            Model
            <select name="model" value={modelId} onChange={(e) => setModel(e.currentTarget.value)}>
              {chatModels.map((m) => (
                <option key={m.id} value={m.id}>{m.name === m.id ? m.id : `${m.name} (${m.id})`}</option>
              ))}
            </select>
          </label>
        </div>
        <label>
          Message
          <textarea name="prompt" rows={3} required value={prompt} onInput={(e) => setPrompt(e.currentTarget.value)} />
        </label>
        <button type="submit" aria-busy={busy} disabled={busy || !modelId}>Send</button>{' '}
        {busy && <button type="button" class="secondary" onClick={() => abort.current?.abort()}>Stop</button>}
      </form>
      <ErrorBox error={error} />
      {(answer || result) && (
        <section class="answer" aria-live="polite">
          <h2>Answer</h2>
          <div class="answer-text" data-testid="answer">{answer || (busy ? '…' : '(empty)')}</div>
          {result && (
            <dl class="facts">
              <div><dt>Tokens in / out</dt><dd data-testid="tokens">{result.usage ? `${num(result.usage.prompt_tokens)} / ${num(result.usage.completion_tokens)}` : '—'}</dd></div>
              <div><dt>Credits charged</dt><dd data-testid="credits">{result.record ? num(result.record.credits) : result.recordMissing ? 'not recorded yet' : '…'}</dd></div>
              <div><dt>citygate overhead</dt><dd data-testid="overhead">{result.overhead ? ms(Number(result.overhead)) : '—'}</dd></div>
              <div><dt>Request id</dt><dd><code>{result.requestId ?? '—'}</code></dd></div>
            </dl>
          )}
        </section>
      )}
    </>
  );
}
