// npm run bench:guard (run by .ci/run): catches drift in what a charged call costs, the day it
// happens. The framework-free relay (bench/relay-server.ts) and citygate with billing on (a
// priced model, a funded user) run side by side against one stub and take turns under load in
// paired windows (bench/paired.ts); the guard takes the median of the paired ratios of CPU per
// call, citygate ÷ relay, for json and for stream, and fails when one is above its limit twice
// running (a second measurement confirms the first).
// A ratio, not a time: the machine's speed cancels out, and both servers see the same moments
// of a shared machine. The limits (bench/guard.json) are the ratios measured on a quiet machine
// plus a margin chosen from the spread of repeated runs; the goal (2.0) is printed too.
//
// Env: GUARD_ROUNDS (default 8), GUARD_SECONDS (per window, default 2), BENCH_CONNECTIONS
// (default 32), BENCH_CITYGATE_ROOT (another checkout: guard that build), GUARD_LIMIT_JSON /
// GUARD_LIMIT_STREAM (override the limits). Linux only (/proc).
import { readFileSync, rmSync } from "node:fs";
import { median, pairedWindows, type Mode } from "./paired.ts";
import { logDirectory } from "./processes.ts";
import { startStubProcess } from "./stub.ts";
import { citygate, relay, type RunningTarget } from "./targets.ts";

type Limits = Record<Mode, number> & { goal: number };
const limits: Limits = JSON.parse(readFileSync(new URL("./guard.json", import.meta.url), "utf8")).limits;
for (const m of ["json", "stream"] as const) {
  const v = process.env[`GUARD_LIMIT_${m.toUpperCase()}`];
  if (v) limits[m] = Number(v);
}
const rounds = Number(process.env.GUARD_ROUNDS ?? 8);
const seconds = Number(process.env.GUARD_SECONDS ?? 2);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 32);
const started = performance.now();

const stub = await startStubProcess();
const servers: RunningTarget[] = [];
for (const t of [relay, citygate]) {
  const r = await t.start({ stub, model: "gpt-4o-mini" });
  if ("skipped" in r) throw new Error(r.skipped);
  servers.push(r);
}
const [floor, gate] = servers;
let failed = false;
console.log(`bench:guard: citygate (billing on) ÷ the relay, CPU per call, ${rounds} paired rounds of ${seconds} s, ${connections} connections`);
try {
  for (const mode of ["json", "stream"] as const) {
    // A ratio over its limit is measured once more before it fails the run: a CI machine busy
    // with something else for a minute skews one measurement (relay 114 µs instead of 60 once),
    // while a real regression is over the limit both times.
    for (let attempt = 1; attempt <= 2; attempt++) {
      const { A, B } = await pairedWindows(floor, gate, mode, { rounds, seconds, connections });
      const ratios = A.map((x, i) => B[i].us / x.us);
      const ratio = median(ratios);
      const over = ratio > limits[mode];
      const verdict = !over ? "ok" : attempt === 1 ? "over: measuring again" : "FAIL";
      console.log(
        `${mode.padEnd(6)} relay ${median(A.map((x) => x.us)).toFixed(0)} µs  citygate ${median(B.map((x) => x.us)).toFixed(0)} µs  ` +
          `ratio ${ratio.toFixed(2)} (rounds ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})  limit ${limits[mode].toFixed(2)}  goal ${limits.goal.toFixed(1)}  ${verdict}`,
      );
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
  rmSync(logDirectory(), { recursive: true, force: true });
}
console.log(`bench:guard ${failed ? "FAILED: a charged call costs more than its limit allows (bench/guard.json)" : "passed"} in ${((performance.now() - started) / 1000).toFixed(0)} s`);
process.exit(failed ? 1 : 0);
