// Counters and histograms that the gateway and its services update, behind a tiny interface
// so shared code imports no Node-only module. The Node runtime installs a prom-client
// implementation (src/runtimes/node/metrics.ts) and serves it at GET /metrics; elsewhere (the
// Workers runtime) every metric is a no-op and /metrics answers 501: per-isolate counters of
// short-lived isolates do not add up to anything meaningful.
//
// Names follow the OpenTelemetry semantic conventions where one fits (http.server.request.
// duration, gen_ai.client.operation.duration, gen_ai.* attribute names as labels), in Prometheus form.

export type Labels = Record<string, string>;

export interface Counter {
  inc(labels: Labels, n?: number): void;
}

export interface Histogram {
  observe(labels: Labels, v: number): void;
}

export interface Metrics {
  /** citygate_http_requests_total{route, method, status} */
  requests: Counter;
  /** http_server_request_duration_seconds{route, method, status}: whole request (streams: to the first byte) */
  requestDuration: Histogram;
  /** citygate_overhead_seconds{route}: time in citygate, upstream waits excluded */
  overhead: Histogram;
  /** citygate_upstream_attempts_total{upstream, model, outcome}: outcome ok | error kind */
  attempts: Counter;
  /** citygate_upstream_failures_total{upstream, reason} */
  failures: Counter;
  /** citygate_upstream_cooldowns_total{upstream} */
  cooldowns: Counter;
  /** gen_ai_client_operation_duration_seconds{gen_ai_operation_name, gen_ai_request_model, upstream, error_type} */
  upstreamDuration: Histogram;
  /** citygate_tokens_total{gen_ai_token_type, gen_ai_request_model, city} (a counter: OTel's gen_ai.client.token.usage is a per-call histogram) */
  tokens: Counter;
  /** citygate_credits_total{city, model} */
  credits: Counter;
  /** citygate_mcp_tool_calls_total{city, server, tool, outcome}: tool calls through /v1/mcp (outcome ok | an error code) */
  mcpCalls: Counter;
  /** The exposition text, or null where metrics are not kept. */
  render(): Promise<{ contentType: string; text: string } | null>;
}

const noop = { inc() {}, observe() {} };

const NOOP: Metrics = {
  requests: noop,
  requestDuration: noop,
  overhead: noop,
  attempts: noop,
  failures: noop,
  cooldowns: noop,
  upstreamDuration: noop,
  tokens: noop,
  credits: noop,
  mcpCalls: noop,
  render: async () => null,
};

let current: Metrics = NOOP;

/** The process's metrics (no-ops until a runtime installs real ones). */
export function metrics(): Metrics {
  return current;
}

export function installMetrics(m: Metrics): void {
  current = m;
}
