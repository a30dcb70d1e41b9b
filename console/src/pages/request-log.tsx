// One call's request log (usage/request-log), opened from its usage record: what was asked and
// what came back — headers and, in full mode, bodies (a stream as its assembled answer) —
// with every secret already redacted by the gateway.
import { ApiError, get } from '../api.ts';
import { Empty, ErrorBox, Loading, ms, num, useLoad, when } from '../ui.tsx';

interface Side {
  headers: Record<string, string>;
  content_type: string | null;
  bytes: number;
  body?: unknown;
  truncated?: boolean;
  omitted?: string;
  assembled?: boolean;
  status?: number;
  stream?: boolean;
  events?: number;
  ended?: string;
  method?: string;
  path?: string;
}
export interface RequestLog {
  request_id: string;
  mode: 'metadata' | 'full';
  route: string;
  model: string | null;
  upstream: string | null;
  status: number;
  created_at: string;
  bodies: 'stored' | 'none' | 'missing';
  request: Side;
  response: Side;
  timings: { received_at: string; head_ms: number; end_ms: number };
  error: { code: string; message: string } | null;
}

const shown = (body: unknown) => (typeof body === 'string' ? body : JSON.stringify(body, null, 2));

function Headers({ h }: { h: Record<string, string> }) {
  return (
    <table class="headers">
      <tbody>
        {Object.entries(h).map(([k, v]) => (
          <tr key={k}><th scope="row">{k}</th><td>{v}</td></tr>
        ))}
      </tbody>
    </table>
  );
}

function Body({ side, log, label }: { side: Side; log: RequestLog; label: string }) {
  if (log.mode === 'metadata') return <p class="muted">Bodies are not kept in metadata mode.</p>;
  if (log.bodies === 'missing') return <p class="muted">The bodies have expired.</p>;
  if (side.omitted) return <p class="muted">{num(side.bytes)} bytes of {side.content_type ?? 'binary data'}, not kept.</p>;
  if (side.body == null) return <p class="muted">No body.</p>;
  return (
    <>
      {(side.assembled || side.truncated) && (
        <p class="muted">
          {side.assembled && `Assembled from ${num(side.events ?? 0)} stream events. `}
          {side.truncated && 'Truncated at 64 KiB.'}
        </p>
      )}
      <pre class="payload log-body" aria-label={label}>{shown(side.body)}</pre>
    </>
  );
}

export function RequestLogView({ usageId }: { usageId: string }) {
  const load = useLoad(() => get<RequestLog>('usage/request-log', { usage_id: usageId }), [usageId]);
  if (load.error) {
    if (load.error instanceof ApiError && load.error.status === 404)
      return <Empty>No request log for this call: request logs were off for its city (REQUEST_LOG or the city's request log setting), or it has expired.</Empty>;
    return <ErrorBox error={load.error} />;
  }
  if (!load.data) return <Loading what="Loading the request log" />;
  const log = load.data;
  return (
    <section class="request-log" aria-label="Request log" data-testid="request-log">
      <p>
        <strong>{log.request.method} {log.request.path}</strong> → {log.status}
        {log.model && <> · {log.model}</>}
        {log.upstream && <> via {log.upstream}</>} · {log.mode} log · {when(log.created_at)} · first byte {ms(log.timings.head_ms)}, done {ms(log.timings.end_ms)}
        {log.response.stream && <> · stream ({log.response.ended})</>}
      </p>
      {log.error && <p class="error">{log.error.code}: {log.error.message}</p>}
      <div class="log-sides">
        <div>
          <h4>Request <small class="muted">{num(log.request.bytes)} bytes</small></h4>
          <Headers h={log.request.headers} />
          <Body side={log.request} log={log} label="Request body" />
        </div>
        <div>
          <h4>Response <small class="muted">{num(log.response.bytes)} bytes</small></h4>
          <Headers h={log.response.headers} />
          <Body side={log.response} log={log} label="Response body" />
        </div>
      </div>
    </section>
  );
}
