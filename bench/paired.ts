// Paired windows of load on running servers (bench/pair.ts, bench/guard.ts): they take turns in
// short windows (rotatedWindows) or are loaded at once (simultaneousWindows), so all see the
// same moments of the machine, and each window reads the server's own CPU time from /proc.
// Differences of a few per cent show this way on a machine where req/s moves by ±30 %.
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

const serverTicks = (t: RunningTarget) => {
  const c = cpuTicks(t.process.pid);
  return c.user + c.sys;
};

/**
 * Work a server does for a call after answering it: citygate writes a call's usage record in a
 * batch up to USAGE_FLUSH_MS (250 ms) later. A window read when its load ends leaves that out
 * (2–10 µs a charged call, measured 2026-11-29); this long after it, the window's batch is in.
 */
export const DEFERRED_WORK_MS = 300;

/** One window of load on one target: the server's CPU µs per call, and req/s. */
export async function window(t: RunningTarget, mode: Mode, sec: number, connections: number): Promise<Window> {
  const before = serverTicks(t);
  const r = await load(t, mode, sec, connections);
  return { us: ((serverTicks(t) - before) * 1e4) / Math.max(1, r.ok), rps: r.rps };
}

async function load(t: RunningTarget, mode: Mode, sec: number, connections: number) {
  const r = await runLoad({ url: t.chatUrl, headers: t.headers, body: BODIES[mode], connections, durationSec: sec });
  if (r.errors) throw new Error(`${t.name}: ${r.errors} errors (${JSON.stringify(r.statusCodes)})`);
  return r;
}

/**
 * A warm-up window each, then `rounds` rounds of one window each. The order turns one place
 * each round (a b c, b c a, c a b), then the same backwards (c b a, b a c, a c b), so over
 * 2 × n rounds each target comes before each other one as often as after it: a window run just
 * after another server's is not always the same target's. Answers the windows of each target,
 * in the order given; window i of every target is from round i.
 *
 * A window's CPU runs from its start to the start of that server's next window (after the last
 * round, to DEFERRED_WORK_MS past its end): what the server did for the window's calls after
 * its load ended counts, and an idle server spends ~1 ms a second (citygate's timers) besides.
 */
export async function rotatedWindows(
  targets: RunningTarget[],
  mode: Mode,
  o: { rounds: number; seconds: number; connections: number; warmupSec?: number },
): Promise<Window[][]> {
  for (const t of targets) await window(t, mode, o.warmupSec ?? 2, o.connections);
  const n = targets.length;
  const started: { ticks: number; ok: number; rps: number }[][] = targets.map(() => []);
  for (let i = 0; i < o.rounds; i++) {
    const backwards = Math.floor(i / n) % 2 === 1;
    for (let k = 0; k < n; k++) {
      const j = backwards ? (2 * n - 1 - k - (i % n)) % n : (i + k) % n;
      const ticks = serverTicks(targets[j]);
      const r = await load(targets[j], mode, o.seconds, o.connections);
      started[j].push({ ticks, ok: r.ok, rps: r.rps });
    }
  }
  await new Promise((res) => setTimeout(res, DEFERRED_WORK_MS));
  return targets.map((t, j) => {
    const end = [...started[j].slice(1).map((w) => w.ticks), serverTicks(t)];
    return started[j].map((w, i) => ({ us: ((end[i] - w.ticks) * 1e4) / Math.max(1, w.ok), rps: w.rps }));
  });
}

/**
 * Windows in which all the targets are under load at once, `connections` shared out among them,
 * the load started in the given order and then in the reverse one, turn about: every target
 * sees the very same moments of the machine, which turns windows apart never quite do (on a
 * busy VM, two servers' CPU per call in one window's turns differed by up to ±40 %, at once by
 * ±15 %). A warm-up window first. Answers the windows of each target, in the order given.
 */
export async function simultaneousWindows(
  targets: RunningTarget[],
  mode: Mode,
  o: { rounds: number; seconds: number; connections: number; warmupSec?: number },
): Promise<Window[][]> {
  const each = Math.max(1, Math.round(o.connections / targets.length));
  await Promise.all(targets.map((t) => window(t, mode, o.warmupSec ?? 2, each)));
  const out: Window[][] = targets.map(() => []);
  const order = targets.map((_, i) => i);
  for (let r = 0; r < o.rounds; r++) {
    const turn = r % 2 ? [...order].reverse() : order;
    const got = await Promise.all(turn.map((j) => window(targets[j], mode, o.seconds, each)));
    turn.forEach((j, k) => out[j].push(got[k]));
  }
  return out;
}
