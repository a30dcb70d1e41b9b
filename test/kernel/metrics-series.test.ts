// The Node runtime's counters and histograms (src/runtimes/node/label-series.ts) expose exactly
// what prom-client's own Counter and Histogram expose for the same updates: the same /metrics
// text, the same JSON for the cluster aggregate (summed over two registries), and a reset.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import client from 'prom-client';
import { counterOf, histogramOf } from '../../src/runtimes/node/label-series.ts';

const BUCKETS = [0.001, 0.01, 0.1, 1];

function both() {
  const ours = new client.Registry();
  const ref = new client.Registry();
  const c = counterOf(ours, 'x_total', 'a counter', ['route', 'status']);
  const h = histogramOf(ours, 'x_seconds', 'a histogram', ['route', 'error_type'], BUCKETS);
  const rc = new client.Counter({ name: 'x_total', help: 'a counter', labelNames: ['route', 'status'], registers: [ref] });
  const rh = new client.Histogram({ name: 'x_seconds', help: 'a histogram', labelNames: ['route', 'error_type'], buckets: BUCKETS, registers: [ref] });
  const updates = (n: number) => {
    for (let i = 0; i < n; i++) {
      const route = ['/a', '/b"q\\'][i % 2];
      const l = { route, status: String(200 + (i % 3)) };
      c.inc(l, i % 5);
      rc.inc(l, i % 5);
      const v = [0.0005, 0.001, 0.05, 0.5, 3][i % 5] + i / 1e6;
      const hl = { route, error_type: i % 7 ? '' : 'upstream_error' };
      h.observe(hl, v);
      rh.observe(hl, v);
    }
    c.inc({ route: '/c', status: '204' });
    rc.inc({ route: '/c', status: '204' });
  };
  return { ours, ref, updates };
}

test('label series expose what prom-client exposes (text, cluster JSON, reset)', async () => {
  const { ours, ref, updates } = both();
  updates(40);
  assert.equal(await ours.metrics(), await ref.metrics());
  const other = both();
  other.updates(13);
  const sum = async (a: client.Registry, b: client.Registry) =>
    client.AggregatorRegistry.aggregate([await a.getMetricsAsJSON(), await b.getMetricsAsJSON()] as never).metrics();
  assert.equal(await sum(ours, other.ours), await sum(ref, other.ref));
  ours.resetMetrics();
  ref.resetMetrics();
  assert.equal(await ours.metrics(), await ref.metrics());
  updates(7);
  assert.equal(await ours.metrics(), await ref.metrics());
});

test('label series refuse what prom-client refuses', () => {
  const r = new client.Registry();
  const c = counterOf(r, 'y_total', 'a counter', ['route']);
  const h = histogramOf(r, 'y_seconds', 'a histogram', ['route'], BUCKETS);
  assert.throws(() => c.inc({ route: '/a' }, -1));
  assert.throws(() => c.inc({ route: '/a' }, NaN));
  assert.throws(() => h.observe({ route: '/a' }, Infinity));
  assert.throws(() => c.inc({ route: '/a', other: 'x' } as never));
});
