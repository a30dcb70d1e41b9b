// Paired A/B of two targets (citygate ones, bare or relay), for differences of a few per cent on a noisy machine:
// `PAIR=citygate-free,citygate-free-limited node bench/pair.ts`. Both servers run at once and
// take turns under load in short windows (A B, then B A, …), so both see the same moments of
// the machine; each window reads the server's CPU time from /proc (as bench/cpu.ts does). It
// prints, per mode, the median CPU µs per call of each target, the median of the paired
// differences, and the median req/s of each.
//
// Env: PAIR (two targets of bench/targets.ts: citygate ones, bare, relay; the same one twice is fine), PAIR_ROUNDS
// (default 10), PAIR_SECONDS (per window, default 3), BENCH_CONNECTIONS (default 32), BENCH_MODES
// (default json,stream); PAIR_A_ENV / PAIR_B_ENV: space-separated NAME=value set while that
// server starts, e.g. PAIR_B_ENV="BENCH_CITYGATE_ROOT=/path/to/other/checkout" (two versions of
// the code) or "BENCH_CITYGATE_NODE_ARGS=--max-semi-space-size=16" (node flags); PAIR_A_REF /
// PAIR_B_REF: a commit that server runs, unpacked from git (bench/reference-build.ts), e.g.
// PAIR=citygate,citygate PAIR_A_REF=<the commit your issue began at>; PAIR_AT_ONCE=1: both
// under load at the same time, half the connections each, alone on the last CPU (as
// bench:guard measures its drift: steadier on a busy machine, at a higher CPU per call since
// the two share a core). Linux only (/proc, taskset).
import { rmSync } from "node:fs";
import { median, rotatedWindows, simultaneousWindows, type Mode } from "./paired.ts";
import { logDirectory, pinApart } from "./processes.ts";
import { resolveCommit, unpackReference, type ReferenceBuild } from "./reference-build.ts";
import { startStubProcess } from "./stub.ts";
import { measuredTarget, startWithEnv, type RunningTarget } from "./targets.ts";

const names = (process.env.PAIR ?? "citygate-free,citygate-free-limited").split(",");
if (names.length !== 2) throw new Error("PAIR must name two targets of bench/targets.ts: citygate ones, bare or relay");
const targets = names.map((n) => measuredTarget(n, "PAIR", { bare: true }));
const rounds = Number(process.env.PAIR_ROUNDS ?? 10);
const seconds = Number(process.env.PAIR_SECONDS ?? 3);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 32);
const modes = (process.env.BENCH_MODES ?? "json,stream").split(",") as Mode[];
const model = "gpt-4o-mini";

const stub = await startStubProcess();
const running: RunningTarget[] = [];
const unpacked: ReferenceBuild[] = [];
process.once("exit", () => unpacked.forEach((b) => b.remove())); // also when a server fails to start
for (const [i, t] of targets.entries()) {
  const env: Record<string, string> = {};
  for (const kv of (process.env[i === 0 ? "PAIR_A_ENV" : "PAIR_B_ENV"] ?? "").split(" ").filter(Boolean)) {
    const at = kv.indexOf("=");
    env[kv.slice(0, at)] = kv.slice(at + 1);
  }
  const ref = process.env[i === 0 ? "PAIR_A_REF" : "PAIR_B_REF"];
  if (ref) {
    const commit = resolveCommit(ref);
    if (!commit) throw new Error(`${i === 0 ? "PAIR_A_REF" : "PAIR_B_REF"}=${ref}: no such commit in this clone`);
    const build = unpackReference(commit);
    unpacked.push(build);
    env.BENCH_CITYGATE_ROOT = build.root;
    console.log(`${i === 0 ? "A" : "B"} runs ${commit.slice(0, 12)} (${build.root})`);
  }
  running.push(await startWithEnv(t, { stub, model }, env));
}
const [a, b] = running;
const atOnce = process.env.PAIR_AT_ONCE === "1";
console.log(`A = ${a.name}, B = ${b.name}: ${rounds} rounds of ${seconds} s windows, ${connections} connections${atOnce ? ", both at once on one CPU" : ""}`);
const unpin = atOnce ? pinApart([a.process.pid, b.process.pid], [process.pid, stub.process.pid]) : () => {};
try {
  for (const mode of modes) {
    const [A, B] = await (atOnce ? simultaneousWindows : rotatedWindows)([a, b], mode, { rounds, seconds, connections });
    const diff = median(A.map((x, i) => (B[i].us - x.us) / x.us));
    const rpsRatio = median(A.map((x, i) => B[i].rps / x.rps));
    console.log(
      `${mode.padEnd(6)} cpu µs/call A ${median(A.map((x) => x.us)).toFixed(0)}  B ${median(B.map((x) => x.us)).toFixed(0)}  median paired (B−A)/A ${(100 * diff).toFixed(1)} %` +
        `   req/s A ${median(A.map((x) => x.rps)).toFixed(0)}  B ${median(B.map((x) => x.rps)).toFixed(0)}  median paired B/A ${rpsRatio.toFixed(3)}`,
    );
  }
} finally {
  unpin();
}
// Every server is stopped (its data directory removed) even when a money check fails, as it does
// for a knock-out build without usage records; the run then exits 1.
let failed = false;
for (const t of running) {
  try {
    if (t.check) console.log(`${t.name}: ${await t.check()}`);
  } catch (e) {
    failed = true;
    console.log(`${t.name}: ${(e as Error).message}`);
  } finally {
    await t.stop();
  }
}
await stub.stop();
rmSync(logDirectory(), { recursive: true, force: true });
process.exit(failed ? 1 : 0);
