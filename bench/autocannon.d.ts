// Minimal types for the parts of autocannon@9's programmatic API the bench uses
// (autocannon ships no type declarations).
declare module "autocannon" {
  import type { EventEmitter } from "node:events";

  type Histogram = {
    min: number;
    max: number;
    average: number;
    mean: number;
    stddev: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
    [key: string]: number;
  };

  namespace autocannon {
    type Options = {
      url: string;
      method?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      connections?: number;
      duration?: number;
      amount?: number;
      pipelining?: number;
      timeout?: number;
      /** ms between samples; a run ends only on a sample (default 1000) */
      sampleInt?: number;
      workers?: number;
    };
    type Result = {
      url: string;
      requests: Histogram;
      latency: Histogram;
      throughput: Histogram;
      duration: number;
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      connections: number;
      statusCodeStats: Record<string, { count: number }>;
      "1xx": number;
      "2xx": number;
      "3xx": number;
      "4xx": number;
      "5xx": number;
      start: Date;
      finish: Date;
    };
    type Instance = EventEmitter & { stop(): void };
  }

  function autocannon(opts: autocannon.Options, cb?: (err: Error | null, result: autocannon.Result) => void): autocannon.Instance;
  export default autocannon;
}
