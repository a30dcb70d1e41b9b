// A time-series chart (uPlot: small, fast, canvas) of one value per UTC day and series.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

const PALETTE = ['#2563eb', '#d97706', '#059669', '#dc2626', '#7c3aed', '#0891b2', '#be185d', '#4d7c0f'];

export interface DaySeries {
  label: string;
  values: Record<string, number>; // day → value
}

export function DayChart({ days, series, title, height = 220 }: { days: string[]; series: DaySeries[]; title: string; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xs = days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
    const data: uPlot.AlignedData = [xs, ...series.map((s) => days.map((d) => s.values[d] ?? 0))];
    const width = () => Math.max(260, el.clientWidth);
    const plot = new uPlot(
      {
        title,
        width: width(),
        height,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [{ incrs: [86_400, 2 * 86_400, 7 * 86_400, 14 * 86_400], values: (_u, vals) => vals.map((v) => new Date(v * 1000).toISOString().slice(5, 10)) }, { size: 60 }],
        series: [
          { label: 'day', value: (_u, v) => (v == null ? '—' : new Date(v * 1000).toISOString().slice(0, 10)) },
          ...series.map((s, i) => ({
            label: s.label,
            stroke: PALETTE[i % PALETTE.length],
            fill: `${PALETTE[i % PALETTE.length]}22`,
            width: 2,
            points: { show: true, size: 7 },
          })),
        ],
      },
      data,
      el,
    );
    const ro = new ResizeObserver(() => plot.setSize({ width: width(), height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.destroy();
    };
  }, [JSON.stringify(days), JSON.stringify(series), title]);
  return <div class="chart" ref={box} role="img" aria-label={`${title}: ${series.map((s) => s.label).join(', ')}`} />;
}
