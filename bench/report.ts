// Formatting of benchmark results: the console table, the ratios, the JSON file.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LoadResult } from "./load.ts";

export type Mode = "json" | "stream";

export type CaseResult = {
  target: string;
  mode: Mode;
  result?: LoadResult;
  /** Requests the stub received during the measured run. */
  upstreamRequests?: number;
  error?: string;
};

export type TargetSummary = {
  name: string;
  status: "ran" | "skipped" | "failed";
  reason?: string;
  notes: string[];
  /** Peak RSS (VmHWM) of the target's server process, sampled after its cases. */
  peakRssMb?: number;
  rssMb?: number;
};

export type Ratios = Record<Mode, { rps?: number; p99?: number }>;

export type Report = {
  startedAt: string;
  config: { durationSec: number; warmupSec: number; connections: number; model: string; modes: Mode[]; targets: string[] };
  machine: { node: string; platform: string; cpus: number; cpuModel: string; memGb: number };
  targets: TargetSummary[];
  cases: CaseResult[];
  stub: { peakRssMb?: number };
  /** "num/den" → ratios; citygate is the charged target. */
  ratios: Record<string, Ratios>;
};

function find(cases: CaseResult[], target: string, mode: Mode): LoadResult | undefined {
  return cases.find((c) => c.target === target && c.mode === mode)?.result;
}

function ratio(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return undefined;
  return Math.round((a / b) * 1000) / 1000;
}

export function computeRatios(cases: CaseResult[], modes: Mode[], num: string, den: string): Ratios {
  const out = {} as Ratios;
  for (const mode of modes) {
    const a = find(cases, num, mode);
    const b = find(cases, den, mode);
    out[mode] = { rps: ratio(a?.rps, b?.rps), p99: ratio(a?.p99Ms, b?.p99Ms) };
  }
  return out;
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r, ri) => r.map((cell, i) => (i === 0 || ri === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join("  ")).join("\n");
}

const fmt = (x: number | undefined, digits = 2) => (x === undefined || !Number.isFinite(x) ? "n/a" : x.toFixed(digits));

export function renderReport(r: Report): string {
  const lines: string[] = [];
  lines.push(`chat/completions load — ${r.config.connections} connections, ${r.config.durationSec}s per case (+${r.config.warmupSec}s warm-up), model ${r.config.model}`);
  lines.push(`node ${r.machine.node}, ${r.machine.cpus} × ${r.machine.cpuModel}`);
  lines.push("");
  const rows = [["target", "mode", "req/s", "p50 ms", "p99 ms", "errors", "requests", "upstream", "vs direct"]];
  for (const c of r.cases) {
    const res = c.result;
    if (!res) {
      rows.push([c.target, c.mode, "failed", "", "", "", "", "", ""]);
      continue;
    }
    const d = find(r.cases, "direct", c.mode);
    rows.push([
      c.target,
      c.mode,
      String(res.rps),
      fmt(res.p50Ms),
      fmt(res.p99Ms),
      String(res.errors),
      String(res.requests),
      c.upstreamRequests === undefined ? "" : String(c.upstreamRequests),
      c.target === "direct" ? "" : fmt(ratio(res.rps, d?.rps), 3),
    ]);
  }
  lines.push(table(rows));

  lines.push("");
  const rr = [["ratio", "mode", "req/s", "p99"]];
  for (const [name, ratios] of Object.entries(r.ratios)) {
    for (const mode of r.config.modes) {
      // A ratio of targets that did not both run says nothing: leave it out.
      if (ratios[mode]?.rps === undefined && ratios[mode]?.p99 === undefined) continue;
      rr.push([name, mode, fmt(ratios[mode]?.rps, 3), fmt(ratios[mode]?.p99, 3)]);
    }
  }
  lines.push(table(rr));

  lines.push("");
  const mem = [["process", "peak RSS MB"]];
  mem.push(["stub", fmt(r.stub.peakRssMb, 1)]);
  for (const t of r.targets) if (t.name !== "direct" && t.status === "ran") mem.push([t.name, fmt(t.peakRssMb, 1)]);
  lines.push(table(mem));

  const notes = r.targets.flatMap((t) =>
    t.status === "ran" ? t.notes.map((n) => `${t.name}: ${n}`) : [`${t.name}: ${t.status.toUpperCase()} — ${t.reason}`],
  );
  for (const c of r.cases) if (c.error) notes.push(`${c.target}/${c.mode}: ${c.error}`);
  if (notes.length) {
    lines.push("");
    for (const n of notes) lines.push(`note  ${n}`);
  }
  return lines.join("\n");
}

export function writeReport(dir: string, r: Report): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${r.startedAt.replace(/[:.]/g, "-")}.json`);
  writeFileSync(file, JSON.stringify(r, null, 2) + "\n");
  return file;
}
