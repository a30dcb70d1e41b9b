// CPU per call of the citygate process: `node bench/cpu.ts`. Loads citygate-free (or, with
// CPU_TARGET=citygate, the charged target; CPU_TARGET=bare, the floor) like `npm run bench`,
// and reads the server's user + system CPU time from /proc/<pid>/stat before and after each case: CPU µs per request is much
// steadier than req/s on a shared machine (other processes take cores, not this process's CPU
// per call). Also prints the server's peak RSS. Linux only (/proc).
//
// Env: BENCH_DURATION (s per case, default 5), BENCH_WARMUP (s of load in each mode before any is measured, default 6), BENCH_CONNECTIONS (default 32), BENCH_MODES
// (default json,stream), CPU_TARGET (a citygate target: citygate-free, citygate, citygate-limited,
// citygate-free-limited, citygate-3up, or bare or relay; several, comma-separated: all in one run,
// taking turns, see sameRun below; CPU_ROUNDS turns each, default 5), BENCH_CITYGATE_NODE_ARGS, BENCH_RATE (one target only: req/s over all
// connections instead of as fast as the server answers: CPU per call at a given load);
// CITYGATE_HEAP_TUNING=0 compares with V8's default heap (src/cli/heap.ts); BENCH_KEEP_LOGS=1 keeps the
// servers' logs (with BENCH_CITYGATE_NODE_ARGS=--trace-gc: the collections under load).
import { chatBodies } from "./chat-bodies.ts";
import { runLoad } from "./load.ts";
import { DEFERRED_WORK_MS, median, rotatedWindows } from "./paired.ts";
import { cpuTicks, memoryOf, removeLogDirectory } from "./processes.ts";
import { startStubProcess } from "./stub.ts";
import { measuredTarget, startWithEnv, type RunningTarget } from "./targets.ts";

const durationSec = Number(process.env.BENCH_DURATION ?? 5);
// citygate's first seconds under load still compile its code: after 2 s, a charged json call
// measured ~90 µs where the next windows gave ~75 (2026-11-29)
const warmupSec = Number(process.env.BENCH_WARMUP ?? 6);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 32);
const rate = Number(process.env.BENCH_RATE ?? 0) || undefined;
const modes = (process.env.BENCH_MODES ?? "json,stream").split(",") as ("json" | "stream")[];
const model = "gpt-4o-mini";
const sameRunRounds = Number(process.env.CPU_ROUNDS ?? 5);
const BODIES = chatBodies(model);
const TICK_US = 1e6 / 100; // USER_HZ
const names = (process.env.CPU_TARGET ?? "citygate-free").split(",");
if (names.length > 1) {
  await sameRun(names);
  process.exit(0);
}
const target = measuredTarget(names[0], "CPU_TARGET", { bare: true });

const stub = await startStubProcess();
const t = await target.start({ stub, model });
if ("skipped" in t) throw new Error(t.skipped);
const pid = t.process.pid;
console.log(`${target.name}: ${connections} connections, ${durationSec}s per case (every mode warmed up ${warmupSec}s first, then 1s before its case)`);
const loadOf = (mode: "json" | "stream") => ({ url: t.chatUrl, headers: t.headers, body: BODIES[mode], connections, rate });
// Every mode is loaded before any is measured. A server keeps getting cheaper for a while after
// its boot (citygate longer than the relay: more code to compile), so a first mode measured after
// its own warm-up alone paid for the rest of it: pinned, citygate's json cost 258 µs a call 2–7 s
// after its boot and 163–185 from 7 s on; stream measured first cost 1.3–2 × stream measured
// second (2026-11-29).
for (const mode of modes) await runLoad({ ...loadOf(mode), durationSec: warmupSec });
for (const mode of modes) {
  const load = loadOf(mode);
  await runLoad({ ...load, durationSec: 1 }); // this mode's own steady state again
  const a = cpuTicks(pid);
  const r = await runLoad({ ...load, durationSec });
  await new Promise((res) => setTimeout(res, DEFERRED_WORK_MS)); // the last usage batch counts too
  const b = cpuTicks(pid);
  const us = (ticks: number) => ((ticks * TICK_US) / Math.max(1, r.ok)).toFixed(0);
  console.log(`${mode.padEnd(6)} req/s ${String(r.rps).padStart(5)}  cpu µs/req ${us(b.user - a.user + b.sys - a.sys).padStart(4)} (system ${us(b.sys - a.sys)})  p99 ${r.p99Ms} ms  errors ${r.errors}`);
}
console.log(`peak RSS ${memoryOf(pid)?.peakRssMb} MB`);
await t.stop();
await stub.stop();
removeLogDirectory();
process.exit(0);

/**
 * CPU_TARGET=relay,citygate (several targets): all of them in one run, as issue 32 asks ("that
 * relay and citygate measured in the same run"). Each is warmed up as above; then, per mode,
 * they take turns in CPU_ROUNDS rounds of durationSec / CPU_ROUNDS s each (bench/paired.ts:
 * rotatedWindows, late usage writes counted), so every target gets the same measured seconds
 * as alone, spread over the same minute of the machine. Prints each target's median CPU µs per
 * call and req/s, and its median ratio, round by round, to the first target.
 */
async function sameRun(list: string[]): Promise<void> {
  const targets = list.map((n) => measuredTarget(n, "CPU_TARGET", { bare: true }));
  const stub = await startStubProcess();
  const running: RunningTarget[] = [];
  for (const t of targets) running.push(await startWithEnv(t, { stub, model }, {}));
  const seconds = durationSec / sameRunRounds;
  console.log(`${list.join(", ")} in one run: ${connections} connections, each target ${sameRunRounds} turns of ${seconds} s per mode (every mode warmed up ${warmupSec}s first, then 1s before its turns)`);
  for (const t of running) for (const mode of modes) await runLoad({ url: t.chatUrl, headers: t.headers, body: BODIES[mode], connections, durationSec: warmupSec });
  for (const mode of modes) {
    const windows = await rotatedWindows(running, mode, { rounds: sameRunRounds, seconds, connections, warmupSec: 1 });
    const [first] = windows;
    const cells = running.map((t, j) => {
      const us = median(windows[j].map((w) => w.us));
      const rps = median(windows[j].map((w) => w.rps));
      const ratio = j === 0 ? "" : ` (${median(windows[j].map((w, i) => w.us / first[i].us)).toFixed(2)} ×)`;
      return `${t.name} ${us.toFixed(0)} µs${ratio} ${rps.toFixed(0)} req/s`;
    });
    console.log(`${mode.padEnd(6)} ${cells.join("  |  ")}`);
  }
  // every server is stopped (its data directory removed) even when a money check fails
  try {
    for (const t of running) {
      console.log(`${t.name}: peak RSS ${memoryOf(t.process.pid)?.peakRssMb} MB${t.check ? `; ${await t.check()}` : ""}`);
    }
  } finally {
    for (const t of running) await t.stop();
    await stub.stop();
    removeLogDirectory();
  }
}
