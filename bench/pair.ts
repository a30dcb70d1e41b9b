// Paired A/B of two citygate targets, for differences of a few per cent on a noisy machine:
// `PAIR=citygate-free,citygate-free-limited node bench/pair.ts`. Both servers run at once and
// take turns under load in short windows (A B, then B A, …), so both see the same moments of
// the machine; each window reads the server's CPU time from /proc (as bench/cpu.ts does). It
// prints, per mode, the median CPU µs per call of each target, the median of the paired
// differences, and the median req/s of each.
//
// Env: PAIR (two citygate targets of bench/targets.ts; the same one twice is fine), PAIR_ROUNDS
// (default 10), PAIR_SECONDS (per window, default 3), BENCH_CONNECTIONS (default 32), BENCH_MODES
// (default json,stream); PAIR_A_ENV / PAIR_B_ENV: space-separated NAME=value set while that
// server starts, e.g. PAIR_B_ENV="BENCH_CITYGATE_ROOT=/path/to/other/checkout" (two versions of
// the code) or "BENCH_CITYGATE_NODE_ARGS=--max-semi-space-size=16" (node flags). Linux only (/proc).
import { rmSync } from "node:fs";
import { chatBodies } from "./chat-bodies.ts";
import { runLoad } from "./load.ts";
import { cpuTicks, logDirectory } from "./processes.ts";
import { startStubProcess } from "./stub.ts";
import { measuredTarget, type RunningTarget } from "./targets.ts";

const names = (process.env.PAIR ?? "citygate-free,citygate-free-limited").split(",");
if (names.length !== 2) throw new Error("PAIR must name two citygate targets of bench/targets.ts");
const targets = names.map((n) => measuredTarget(n, "PAIR"));
const rounds = Number(process.env.PAIR_ROUNDS ?? 10);
const seconds = Number(process.env.PAIR_SECONDS ?? 3);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 32);
const modes = (process.env.BENCH_MODES ?? "json,stream").split(",") as ("json" | "stream")[];
const model = "gpt-4o-mini";
const BODIES = chatBodies(model);

const median = (v: number[]) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** One window of load on one target: CPU µs per call and req/s. */
async function window(t: RunningTarget, mode: "json" | "stream", sec: number): Promise<{ us: number; rps: number }> {
  const ticks = () => {
    const c = cpuTicks(t.process.pid);
    return c.user + c.sys;
  };
  const before = ticks();
  const r = await runLoad({ url: t.chatUrl, headers: t.headers, body: BODIES[mode], connections, durationSec: sec });
  if (r.errors) throw new Error(`${t.name}: ${r.errors} errors (${JSON.stringify(r.statusCodes)})`);
  return { us: ((ticks() - before) * 1e4) / Math.max(1, r.ok), rps: r.rps };
}

const stub = await startStubProcess();
const running: RunningTarget[] = [];
for (const [i, t] of targets.entries()) {
  const saved = { ...process.env };
  for (const kv of (process.env[i === 0 ? "PAIR_A_ENV" : "PAIR_B_ENV"] ?? "").split(" ").filter(Boolean)) {
    const at = kv.indexOf("=");
    process.env[kv.slice(0, at)] = kv.slice(at + 1);
  }
  const r = await t.start({ stub, model });
  process.env = saved;
  if ("skipped" in r) throw new Error(r.skipped);
  running.push(r);
}
const [a, b] = running;
console.log(`A = ${a.name}, B = ${b.name}: ${rounds} rounds of ${seconds} s windows, ${connections} connections`);
for (const mode of modes) {
  for (const t of running) await window(t, mode, 2); // warm-up
  const A: { us: number; rps: number }[] = [];
  const B: { us: number; rps: number }[] = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) (A.push(await window(a, mode, seconds)), B.push(await window(b, mode, seconds)));
    else (B.push(await window(b, mode, seconds)), A.push(await window(a, mode, seconds)));
  }
  const diff = median(A.map((x, i) => (B[i].us - x.us) / x.us));
  const rpsRatio = median(A.map((x, i) => B[i].rps / x.rps));
  console.log(
    `${mode.padEnd(6)} cpu µs/call A ${median(A.map((x) => x.us)).toFixed(0)}  B ${median(B.map((x) => x.us)).toFixed(0)}  median paired (B−A)/A ${(100 * diff).toFixed(1)} %` +
      `   req/s A ${median(A.map((x) => x.rps)).toFixed(0)}  B ${median(B.map((x) => x.rps)).toFixed(0)}  median paired B/A ${rpsRatio.toFixed(3)}`,
  );
}
for (const t of running) {
  if (t.check) console.log(`${t.name}: ${await t.check()}`);
  await t.stop();
}
await stub.stop();
rmSync(logDirectory(), { recursive: true, force: true });
process.exit(0);
