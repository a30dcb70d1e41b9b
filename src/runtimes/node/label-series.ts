// Counters and histograms kept by label set, registered with a prom-client Registry as custom
// metrics (name, help, type, get() in prom-client's JSON shape, reset()), so /metrics and the
// cluster aggregate read them as they read prom-client's own. Why not prom-client's Counter and
// Histogram: each update there builds a hash string of the labels and validates them (a
// child from labels() does too), several µs per call for the ~9 updates of a chat call; here a
// label set's series is found by one Map lookup per label value and updated in place.
import type client from 'prom-client';
import type { Labels } from '../../kernel/metrics.ts';

type Value = { labels: Record<string, string | number>; value: number; metricName?: string };

/** Series by label values, one Map level per label name (in declared order). */
class Series<S> {
  readonly names: readonly string[];
  readonly all: S[] = [];
  #root = new Map<unknown, any>();
  readonly #make: (labels: Record<string, string>) => S;

  constructor(names: readonly string[], make: (labels: Record<string, string>) => S) {
    this.names = names;
    this.#make = make;
  }

  of(l: Labels): S {
    const names = this.names;
    let m = this.#root;
    const last = names.length - 1;
    for (let i = 0; i < last; i++) {
      const v = l[names[i]];
      let next = m.get(v);
      if (next === undefined) m.set(v, (next = new Map()));
      m = next;
    }
    const v = last >= 0 ? l[names[last]] : undefined;
    let s = m.get(v);
    if (s === undefined) {
      const own: Record<string, string> = {};
      for (const k of Object.keys(l)) {
        if (!names.includes(k)) throw new Error(`Added label "${k}" is not included in initial labelset: ${JSON.stringify(names)}`);
        if (l[k] !== undefined) own[k] = String(l[k]);
      }
      m.set(v, (s = this.#make(own)));
      this.all.push(s);
    }
    return s;
  }

  clear(): void {
    this.#root = new Map();
    this.all.length = 0;
  }
}

interface Registered {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; values: Value[]; aggregator: 'sum' }>;
  reset(): void;
}

export function counterOf(registry: client.Registry, name: string, help: string, labelNames: string[]) {
  const series = new Series(labelNames, (labels) => ({ labels, value: 0 }));
  const metric: Registered = {
    name,
    help,
    type: 'counter',
    aggregator: 'sum',
    get: async () => ({ name, help, type: 'counter', aggregator: 'sum', values: series.all.map((s) => ({ labels: { ...s.labels }, value: s.value })) }),
    reset: () => series.clear(),
  };
  registry.registerMetric(metric as unknown as client.Metric);
  return {
    inc(l: Labels, n = 1): void {
      if (!(n >= 0) || n === Infinity) throw new TypeError(`Value is not a valid counter increment: ${n}`);
      series.of(l).value += n;
    },
  };
}

export function histogramOf(registry: client.Registry, name: string, help: string, labelNames: string[], buckets: number[]) {
  const bounds = [...buckets].sort((a, b) => a - b);
  const series = new Series(labelNames, (labels) => ({ labels, counts: new Array<number>(bounds.length).fill(0), sum: 0, count: 0 }));
  const metric: Registered = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    async get() {
      const values: Value[] = [];
      for (const s of series.all) {
        let acc = 0;
        for (let i = 0; i < bounds.length; i++) {
          acc += s.counts[i];
          values.push({ labels: { le: bounds[i], ...s.labels }, value: acc, metricName: `${name}_bucket` });
        }
        values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${name}_bucket` });
        values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${name}_sum` });
        values.push({ labels: { ...s.labels }, value: s.count, metricName: `${name}_count` });
      }
      return { name, help, type: 'histogram', aggregator: 'sum', values };
    },
    reset: () => series.clear(),
  };
  registry.registerMetric(metric as unknown as client.Metric);
  return {
    observe(l: Labels, v: number): void {
      if (!Number.isFinite(v)) throw new TypeError(`Value is not a valid number: ${v}`);
      const s = series.of(l);
      s.sum += v;
      s.count++;
      for (let i = 0; i < bounds.length; i++) {
        if (v <= bounds[i]) {
          s.counts[i]++;
          break;
        }
      }
    },
  };
}
