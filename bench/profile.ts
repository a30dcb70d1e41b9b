// Where a citygate target spends its CPU or allocates, under the bench's load and nothing else:
// `node bench/profile.ts`. Starts the target with the inspector on a free port, loads it (warm-up
// first), and profiles only the measured window through the DevTools protocol, so the boot (module
// compilation, migrations) stays out of the figures, unlike `--cpu-prof`. Prints the top functions
// and files by self time (PROFILE=cpu) or by bytes allocated per request (PROFILE=alloc: V8's
// sampling heap profiler, with the objects already collected counted in; PROFILE=promoted: only
// the objects that outlived a young collection, what makes full collections), and writes the
// raw profile for DevTools.
//
// Env: PROFILE (cpu | alloc | promoted, default cpu), CPU_TARGET (a citygate target, default citygate-free; or relay, bare),
// BENCH_MODES (one mode: json or stream, default json), BENCH_DURATION (s, default 8),
// BENCH_CONNECTIONS (default 32), PROFILE_TOP (rows, default 40), PROFILE_OUT (file written).
import { writeFileSync } from "node:fs";
import { chatBodies } from "./chat-bodies.ts";
import { runLoad } from "./load.ts";
import { freePort, removeLogDirectory } from "./processes.ts";
import { startStubProcess } from "./stub.ts";
import { measuredTarget } from "./targets.ts";

type CallFrame = { functionName: string; url: string; lineNumber: number };
type Ranked = Map<string, number>;

const kind = process.env.PROFILE === "alloc" || process.env.PROFILE === "promoted" ? process.env.PROFILE : "cpu";
const mode = (process.env.BENCH_MODES ?? "json") as "json" | "stream";
const durationSec = Number(process.env.BENCH_DURATION ?? 8);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 32);
const top = Number(process.env.PROFILE_TOP ?? 40);
const out = process.env.PROFILE_OUT ?? `/tmp/citygate-${mode}.${kind === "cpu" ? "cpuprofile" : "heapprofile"}`;
const target = measuredTarget(process.env.CPU_TARGET ?? "citygate-free", "CPU_TARGET", { bare: true });

const port = await freePort();
// the target's own process gets the inspector (citygate's or the floor's flags)
const flags = target.name === "bare" || target.name === "relay" ? "BENCH_FLOOR_NODE_ARGS" : "BENCH_CITYGATE_NODE_ARGS";
process.env[flags] = `${process.env[flags] ?? ""} --inspect=127.0.0.1:${port}`.trim();
const stub = await startStubProcess();
const t = await target.start({ stub, model: "gpt-4o-mini" });
if ("skipped" in t) throw new Error(t.skipped);
const load = { url: t.chatUrl, headers: t.headers, body: chatBodies("gpt-4o-mini")[mode], connections };
await runLoad({ ...load, durationSec: 3 });

const inspector = await devtools(port);
let profile: unknown;
let requests: number;
if (kind === "cpu") {
  await inspector.send("Profiler.enable");
  await inspector.send("Profiler.setSamplingInterval", { interval: 200 });
  await inspector.send("Profiler.start");
  requests = (await runLoad({ ...load, durationSec })).ok;
  profile = (await inspector.send("Profiler.stop")).profile;
} else {
  await inspector.send("HeapProfiler.enable");
  // promoted: only what outlived young collections (copied to the old generation, or still alive)
  await inspector.send("HeapProfiler.startSampling", { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: kind === "alloc" });
  requests = (await runLoad({ ...load, durationSec })).ok;
  profile = (await inspector.send("HeapProfiler.stopSampling")).profile;
}
inspector.close();
await t.stop();
await stub.stop();
removeLogDirectory();
writeFileSync(out, JSON.stringify(profile));

const byFunction: Ranked = new Map();
const byFile: Ranked = new Map();
const add = (frame: CallFrame, v: number) => {
  const file = frame.url.replace(/^file:\/\//, "").replace(/.*node_modules\/((@[^/]+\/)?[^/]+).*/, "npm:$1").replace(/.*\/(src|bench)\//, "$1/");
  const fn = `${frame.functionName || "(anonymous)"} ${file || "(native)"}:${frame.lineNumber + 1}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + v);
  byFile.set(file || frame.functionName, (byFile.get(file || frame.functionName) ?? 0) + v);
};
let unit: (v: number) => string;
if (kind === "cpu") {
  // Self time: each sample's time delta goes to the node it landed in.
  const p = profile as { nodes: { id: number; callFrame: CallFrame }[]; samples: number[]; timeDeltas: number[] };
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) total += p.timeDeltas[i] ?? 0;
  for (let i = 0; i < p.samples.length; i++) add(nodes.get(p.samples[i])!.callFrame, p.timeDeltas[i] ?? 0);
  unit = (v) => `${((100 * v) / total).toFixed(2).padStart(6)} %  ${(v / requests).toFixed(2).padStart(6)} µs/req`;
} else {
  const walk = (n: { callFrame: CallFrame; selfSize: number; children: unknown[] }) => {
    add(n.callFrame, n.selfSize);
    for (const c of n.children) walk(c as typeof n);
  };
  walk((profile as { head: Parameters<typeof walk>[0] }).head);
  unit = (v) => `${String(Math.round(v / requests)).padStart(6)} B/req`;
}
const print = (title: string, m: Ranked) => {
  console.log(`\n${title}`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${unit(v)}  ${k}`);
};
console.log(`${target.name} ${mode}: ${requests} requests in ${durationSec}s profiled (${kind}); raw profile: ${out}`);
print("by function (self)", byFunction);
print("by file", byFile);
process.exit(0);

/** A DevTools protocol session with the server's inspector. */
async function devtools(inspectPort: number) {
  const [{ webSocketDebuggerUrl }] = (await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
  const ws = new WebSocket(webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.addEventListener("open", resolve);
    ws.addEventListener("error", reject);
  });
  const pending = new Map<number, (m: { result?: any; error?: { message: string } }) => void>();
  ws.addEventListener("message", (e) => {
    const m = JSON.parse(String(e.data));
    pending.get(m.id)?.(m);
    pending.delete(m.id);
  });
  let next = 0;
  return {
    send(method: string, params: object = {}): Promise<any> {
      const id = ++next;
      return new Promise((resolve, reject) => {
        pending.set(id, (m) => (m.error ? reject(new Error(`${method}: ${m.error.message}`)) : resolve(m.result)));
        ws.send(JSON.stringify({ id, method, params }));
      });
    },
    close: () => ws.close(),
  };
}
