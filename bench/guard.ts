// npm run bench:guard (run by .ci/run): catches drift in what a charged call costs, the day it
// happens. Three servers run side by side against one stub and take turns under load in
// rotated windows (bench/paired.ts), so all three see the same moments of a shared machine:
// - the framework-free relay (bench/relay-server.ts), the floor;
// - citygate with billing on (a priced model, a funded user) as of the reference commit of
//   bench/guard.json, unpacked from git (bench/reference-build.ts);
// - citygate with billing on as of this checkout.
// For json and for stream it takes the medians of two paired ratios of CPU per call:
// - this build ÷ the relay: the goal (2.0) and a limit above it. The ratio moves with the
//   machine (a relay costs 40 µs on one, 90 on another, and citygate's share does not scale
//   alike), so its limit is loose: it bounds the cost, it cannot see a 15 % drift;
// - this build ÷ the reference: the drift. The same program twice moves alike with the machine,
//   so this ratio stays near 1.00 (0.935–1.028 in quiet runs here), and a change that costs more than `drift`
//   (bench/guard.json) fails the run. A change that is worth its cost moves the reference
//   forward (guard.json's commit), saying so and what it measured in its commit message.
// A ratio over its limit is measured once more before it fails the run (a second measurement
// confirms the first): a CI machine busy with something else for a minute skews one.
//
// Env: GUARD_ROUNDS (default 12), GUARD_SECONDS (per window, default 1), BENCH_CONNECTIONS
// (default 32), BENCH_CITYGATE_ROOT (another checkout: guard that build), GUARD_REFERENCE (a
// commit to compare with instead of guard.json's; `none`: no drift check), GUARD_LIMIT_JSON /
// GUARD_LIMIT_STREAM / GUARD_DRIFT (override the limits). Linux only (/proc).
import { readFileSync, rmSync } from "node:fs";
import { median, rotatedWindows, type Mode, type Window } from "./paired.ts";
import { logDirectory } from "./processes.ts";
import { resolveCommit, unpackReference, type ReferenceBuild } from "./reference-build.ts";
import { startStubProcess } from "./stub.ts";
import { citygate, relay, type RunningTarget } from "./targets.ts";

type Config = { limits: Record<Mode, number> & { goal: number }; reference: { commit: string; drift: number } };
const config: Config = JSON.parse(readFileSync(new URL("./guard.json", import.meta.url), "utf8"));
const { limits } = config;
for (const m of ["json", "stream"] as const) {
  const v = process.env[`GUARD_LIMIT_${m.toUpperCase()}`];
  if (v) limits[m] = Number(v);
}
const drift = Number(process.env.GUARD_DRIFT ?? config.reference.drift);
// 12 windows of 1 s rather than 6 of 1.5: the same time, and a median of twelve is steadier (with
// 6 × 1.5 s, one run of a build 15 % costlier measured 1.07 ×, under the limit)
const rounds = Number(process.env.GUARD_ROUNDS ?? 12);
const seconds = Number(process.env.GUARD_SECONDS ?? 1);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 32);
const started = performance.now();

const wanted = process.env.GUARD_REFERENCE ?? config.reference.commit;
let reference: ReferenceBuild | null = null;
if (wanted !== "none") {
  const commit = resolveCommit(wanted);
  if (commit) reference = unpackReference(commit);
  else console.log(`bench:guard: the reference commit ${wanted} is not in this clone (a shallow clone? git fetch --unshallow): no drift check`);
}

const stub = await startStubProcess();
const servers: RunningTarget[] = [];
const start = async (t: typeof citygate, root?: string) => {
  const own = process.env.BENCH_CITYGATE_ROOT;
  if (root) process.env.BENCH_CITYGATE_ROOT = root;
  try {
    const r = await t.start({ stub, model: "gpt-4o-mini" });
    if ("skipped" in r) throw new Error(r.skipped);
    servers.push(r);
    return r;
  } finally {
    if (own === undefined) delete process.env.BENCH_CITYGATE_ROOT;
    else process.env.BENCH_CITYGATE_ROOT = own;
  }
};
let failed = false;
try {
  const floor = await start(relay);
  const before = reference ? await start(citygate, reference.root) : null;
  const gate = await start(citygate);
  const targets = before ? [floor, before, gate] : [floor, gate];
  console.log(
    `bench:guard: citygate (billing on) ÷ the relay${reference ? ` and ÷ citygate at ${reference.commit.slice(0, 12)}` : ""}, ` +
      `CPU per call, ${rounds} rotated rounds of ${seconds} s, ${connections} connections`,
  );
  const ratio = (of: Window[], to: Window[]) => {
    const r = of.map((x, i) => x.us / to[i].us);
    return { median: median(r), range: `${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}` };
  };
  const us = (w: Window[]) => `${median(w.map((x) => x.us)).toFixed(0)} µs`;
  for (const mode of ["json", "stream"] as const) {
    for (let attempt = 1; attempt <= 2; attempt++) {
      // json runs first and warms the code both modes share; stream's own needs less
      const windows = await rotatedWindows(targets, mode, { rounds, seconds, connections, warmupSec: mode === "json" ? 2 : 1 });
      const [relayW, gateW] = [windows[0], windows[windows.length - 1]];
      const toRelay = ratio(gateW, relayW);
      const overRelay = toRelay.median > limits[mode];
      let line = `${mode.padEnd(6)} relay ${us(relayW)}  citygate ${us(gateW)}  ÷ relay ${toRelay.median.toFixed(2)} (rounds ${toRelay.range}), limit ${limits[mode].toFixed(2)}, goal ${limits.goal.toFixed(1)}`;
      let overDrift = false;
      if (before) {
        const toBefore = ratio(gateW, windows[1]);
        overDrift = toBefore.median > 1 + drift;
        line += `  |  reference ${us(windows[1])}  ÷ reference ${toBefore.median.toFixed(3)} (rounds ${toBefore.range}), limit ${(1 + drift).toFixed(2)}`;
      }
      const over = overRelay || overDrift;
      console.log(`${line}  ${!over ? "ok" : attempt === 1 ? "over: measuring again" : "FAIL"}`);
      if (!over) break;
      if (attempt === 2) failed = true;
    }
  }
  if (gate.check) console.log(await gate.check()); // the money still adds up after the load
} catch (e) {
  for (const s of servers) console.error(`--- ${s.name} log ---\n${s.process.logTail()}`);
  throw e;
} finally {
  for (const s of servers) await s.stop();
  await stub.stop();
  reference?.remove();
  rmSync(logDirectory(), { recursive: true, force: true });
}
console.log(
  `bench:guard ${failed ? "FAILED: a charged call costs more than bench/guard.json allows" : "passed"} in ${((performance.now() - started) / 1000).toFixed(0)} s`,
);
process.exit(failed ? 1 : 0);
