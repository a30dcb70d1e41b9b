// prom-client behind the kernel's Metrics interface. One Registry per process. With several
// worker processes (node:cluster) the registry is also what prom-client's AggregatorRegistry
// collects: a worker that gets GET /metrics asks the primary, the primary gathers every
// worker's registry (AggregatorRegistry.clusterMetrics: counters and histograms summed) and
// answers. The primary needs two lines: `serveClusterMetrics()` once after forking. The counters
// and histograms themselves are label-series.ts's (cheaper per update than prom-client's own).
import cluster from 'node:cluster';
import client from 'prom-client';
import { installMetrics, type Metrics } from '../../kernel/metrics.ts';
import { counterOf, histogramOf } from './label-series.ts';

const REQ = 'citygate:metrics-req';
const RES = 'citygate:metrics-res';

const SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const OVERHEAD = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

export function promMetrics(): Metrics & { registry: client.Registry } {
  const registry = new client.Registry();
  const counter = (name: string, help: string, labelNames: string[]) => counterOf(registry, name, help, labelNames);
  const histogram = (name: string, help: string, labelNames: string[], buckets: number[]) => histogramOf(registry, name, help, labelNames, buckets);
  return {
    registry,
    requests: counter('citygate_http_requests_total', 'HTTP requests by route, method and status', ['route', 'method', 'status']),
    requestDuration: histogram(
      'http_server_request_duration_seconds',
      'Duration of HTTP requests (streams: to the first byte)',
      ['route', 'method', 'status'],
      SECONDS,
    ),
    overhead: histogram('citygate_overhead_seconds', 'Time spent in citygate per request, upstream waits excluded', ['route'], OVERHEAD),
    attempts: counter('citygate_upstream_attempts_total', 'Upstream attempts by upstream, model and outcome', ['upstream', 'model', 'outcome']),
    failures: counter('citygate_upstream_failures_total', 'Failed upstream attempts by upstream and reason', ['upstream', 'reason']),
    cooldowns: counter('citygate_upstream_cooldowns_total', 'Times an upstream was put in cooldown', ['upstream']),
    upstreamDuration: histogram(
      'gen_ai_client_operation_duration_seconds',
      'Duration of upstream attempts (streams: to the first byte)',
      ['gen_ai_operation_name', 'gen_ai_request_model', 'upstream', 'error_type'],
      SECONDS,
    ),
    tokens: counter('citygate_tokens_total', 'Tokens of AI calls by type (input, output), model and city', ['gen_ai_token_type', 'gen_ai_request_model', 'city']),
    credits: counter('citygate_credits_total', 'Credits charged by city and model', ['city', 'model']),
    mcpCalls: counter('citygate_mcp_tool_calls_total', 'Tool calls through /v1/mcp by city, server, tool and outcome', ['city', 'server', 'tool', 'outcome']),
    async render() {
      if (cluster.isWorker && process.send) return { contentType: registry.contentType, text: await fromPrimary() };
      return { contentType: registry.contentType, text: await registry.metrics() };
    },
  };
}

let pending = new Map<number, (r: { text?: string; error?: string }) => void>();
let seq = 0;

/** In a cluster worker: the primary's aggregate of every worker's registry. */
function fromPrimary(): Promise<string> {
  const id = ++seq;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error('the cluster primary did not answer the metrics request'));
    }, 5000);
    pending.set(id, (r) => {
      clearTimeout(timer);
      if (r.error !== undefined) reject(new Error(r.error));
      else resolve(r.text ?? '');
    });
    process.send!({ type: REQ, id });
  });
}

/** Installs prom-client metrics for this process (call once at boot, before serving). */
export function installNodeMetrics(): void {
  const m = promMetrics();
  if (cluster.isWorker) {
    // prom-client answers the primary's collection requests with this registry
    client.AggregatorRegistry.setRegistries([m.registry]);
    new client.AggregatorRegistry();
    process.on('message', (msg: any) => {
      if (msg?.type !== RES) return;
      const done = pending.get(msg.id);
      pending.delete(msg.id);
      done?.(msg);
    });
  }
  installMetrics(m);
}

/** In the cluster primary: answer workers' GET /metrics with the aggregate of all workers. */
export function serveClusterMetrics(): void {
  const agg = new client.AggregatorRegistry();
  cluster.on('message', (worker, msg: any) => {
    if (msg?.type !== REQ) return;
    agg.clusterMetrics().then(
      (text) => worker.send({ type: RES, id: msg.id, text }),
      (e: Error) => worker.send({ type: RES, id: msg.id, error: e.message }),
    );
  });
}
