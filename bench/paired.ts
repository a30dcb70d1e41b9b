// Paired windows of load on two running servers (bench/pair.ts, bench/guard.ts): A and B take
// turns in short windows (A B, then B A, …), so both see the same moments of the machine, and
// each window reads the server's own CPU time from /proc. Differences of a few per cent show
// this way on a machine where req/s moves by ±30 %.
import { chatBodies } from "./chat-bodies.ts";
import { runLoad } from "./load.ts";
import { cpuTicks } from "./processes.ts";
import type { RunningTarget } from "./targets.ts";

export type Mode = "json" | "stream";
export type Window = { us: number; rps: number };

const BODIES = chatBodies("gpt-4o-mini");

export const median = (v: number[]) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** One window of load on one target: the server's CPU µs per call, and req/s. */
export async function window(t: RunningTarget, mode: Mode, sec: number, connections: number): Promise<Window> {
  const ticks = () => {
    const c = cpuTicks(t.process.pid);
    return c.user + c.sys;
  };
  const before = ticks();
  const r = await runLoad({ url: t.chatUrl, headers: t.headers, body: BODIES[mode], connections, durationSec: sec });
  if (r.errors) throw new Error(`${t.name}: ${r.errors} errors (${JSON.stringify(r.statusCodes)})`);
  return { us: ((ticks() - before) * 1e4) / Math.max(1, r.ok), rps: r.rps };
}

/** A warm-up window each, then `rounds` paired windows, the order alternating. */
export async function pairedWindows(
  a: RunningTarget,
  b: RunningTarget,
  mode: Mode,
  o: { rounds: number; seconds: number; connections: number; warmupSec?: number },
): Promise<{ A: Window[]; B: Window[] }> {
  for (const t of [a, b]) await window(t, mode, o.warmupSec ?? 2, o.connections);
  const A: Window[] = [];
  const B: Window[] = [];
  for (let i = 0; i < o.rounds; i++) {
    if (i % 2 === 0) (A.push(await window(a, mode, o.seconds, o.connections)), B.push(await window(b, mode, o.seconds, o.connections)));
    else (B.push(await window(b, mode, o.seconds, o.connections)), A.push(await window(a, mode, o.seconds, o.connections)));
  }
  return { A, B };
}
