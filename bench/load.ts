// One load case: autocannon (programmatic) in this process against one URL. Latency
// percentiles are computed from autocannon's per-response timings (float ms) rather than its
// 1 ms-resolution histogram, so sub-millisecond differences between targets stay visible.
import autocannon from "autocannon";

export type LoadOptions = {
  url: string;
  headers: Record<string, string>;
  body: string;
  connections: number;
  durationSec: number;
  timeoutSec?: number;
  /** requests per second over all connections (autocannon's overallRate); unset: as fast as the server answers */
  rate?: number;
};

export type LoadResult = {
  requests: number;
  ok: number;
  /** non-2xx responses + connection errors + timeouts */
  errors: number;
  statusCodes: Record<string, number>;
  durationSec: number;
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
};

export function runLoad(opts: LoadOptions): Promise<LoadResult> {
  let latencies = new Float64Array(1 << 16);
  let n = 0;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: opts.url,
        method: "POST",
        headers: { "content-type": "application/json", ...opts.headers },
        body: opts.body,
        connections: opts.connections,
        duration: opts.durationSec,
        timeout: opts.timeoutSec ?? 10,
        // autocannon stops only on a sample tick (default every 1 s): a 1.5 s run would load
        // the server for 2 s. Ticks every 100 ms end it within 100 ms of its duration.
        sampleInt: 100,
        ...(opts.rate ? { overallRate: opts.rate } : {}),
      },
      (err, result) => {
        if (err) return reject(err);
        const sorted = latencies.subarray(0, n).sort();
        const pct = (p: number) => (n === 0 ? NaN : round2(sorted[Math.min(n - 1, Math.floor((p / 100) * n))]));
        const statusCodes: Record<string, number> = {};
        for (const [code, { count }] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = count;
        const total = Object.values(statusCodes).reduce((a, b) => a + b, 0);
        resolve({
          requests: total,
          ok: n,
          errors: result.non2xx + result.errors,
          statusCodes,
          durationSec: result.duration,
          rps: Math.round(n / result.duration),
          p50Ms: pct(50),
          p90Ms: pct(90),
          p99Ms: pct(99),
          maxMs: n ? round2(sorted[n - 1]) : NaN,
        });
      },
    );
    instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
      if (statusCode < 200 || statusCode > 299) return;
      if (n === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2);
        bigger.set(latencies);
        latencies = bigger;
      }
      latencies[n++] = responseTime;
    });
  });
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
