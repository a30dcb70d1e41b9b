// `npm run bench`: load POST /v1/chat/completions (JSON and streaming) on every target and
// print req/s, p50, p99, errors, ratios and peak RSS; write bench/results/<timestamp>.json.
//
// Env: BENCH_DURATION (s per case, default 10), BENCH_CONNECTIONS (default 50),
//      BENCH_WARMUP (s of unrecorded load before each case, default 2),
//      BENCH_TARGETS (default "direct,bare,citygate,citygate-free,citygate-limited,citygate-free-limited,citygate-3up,portkey"; citygate is
//      charged; *-limited run with the rate limits of BENCH_LIMITS, KEY=VALUE,…, by default far above the load), BENCH_MODES (default "json,stream"),
//      BENCH_MODEL (default "gpt-4o-mini"), BENCH_PORTKEY_PRELOAD=0 (no streaming workaround).
import { rmSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { runLoad } from "./load.ts";
import { logDirectory, memoryOf } from "./processes.ts";
import { chatBodies, EXPECTED_REPLY } from "./chat-bodies.ts";
import { computeRatios, renderReport, writeReport, type CaseResult, type Mode, type Report, type TargetSummary } from "./report.ts";
import { startStubProcess, type StubProcess } from "./stub.ts";
import { TARGETS, type RunningTarget } from "./targets.ts";

function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got ${JSON.stringify(raw)}`);
  return n;
}

function envList(name: string, fallback: string[]): string[] {
  const raw = process.env[name];
  return raw ? raw.split(",").map((s) => s.trim()).filter(Boolean) : fallback;
}

const durationSec = envNumber("BENCH_DURATION", 10);
const connections = Math.max(1, Math.floor(envNumber("BENCH_CONNECTIONS", 50)));
const warmupSec = envNumber("BENCH_WARMUP", 2);
const model = process.env.BENCH_MODEL ?? "gpt-4o-mini";
const modes = envList("BENCH_MODES", ["json", "stream"]) as Mode[];
const targetNames = envList("BENCH_TARGETS", TARGETS.map((t) => t.name));
for (const m of modes) if (m !== "json" && m !== "stream") throw new Error(`BENCH_MODES: unknown mode ${m}`);
for (const t of targetNames) if (!TARGETS.some((x) => x.name === t)) throw new Error(`BENCH_TARGETS: unknown target ${t}`);

/** The ratios the report prints: charged vs free, each vs Portkey, and vs the direct call. */
const RATIOS: [string, string][] = [
  ["citygate", "citygate-free"],
  ["citygate-limited", "citygate"],
  ["citygate-free-limited", "citygate-free"],
  ["citygate", "portkey"],
  ["citygate-free", "portkey"],
  // how much of the floor (a relay that does nothing else) citygate keeps, and the floor vs Portkey
  ["citygate-free", "bare"],
  ["bare", "portkey"],
  ["citygate", "direct"],
  ["citygate-free", "direct"],
  ["portkey", "direct"],
];

const BODIES = chatBodies(model);

/** One real request per mode before loading: the answer must be the stub's, and the stub must have seen it. */
async function preflight(target: RunningTarget, mode: Mode, stub: StubProcess): Promise<string | undefined> {
  const before = (await stub.stats()).requestCount;
  let res: Response;
  try {
    res = await fetch(target.chatUrl, {
      method: "POST",
      headers: { "content-type": "application/json", ...target.headers },
      body: BODIES[mode],
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    return `request failed: ${(err as Error).message}`;
  }
  const text = await res.text();
  if (res.status !== 200) return `HTTP ${res.status}: ${text.slice(0, 300)}`;
  if (mode === "json") {
    let body: { choices?: { message?: { content?: string } }[]; usage?: { total_tokens?: number } };
    try {
      body = JSON.parse(text);
    } catch {
      return `not JSON: ${text.slice(0, 200)}`;
    }
    if (body.choices?.[0]?.message?.content !== EXPECTED_REPLY) return `unexpected reply: ${text.slice(0, 300)}`;
    if (!body.usage?.total_tokens) return "no usage in the response";
  } else {
    let content = "";
    let usage = false;
    for (const line of text.split("\n")) {
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      try {
        const chunk = JSON.parse(line.slice(6)) as { choices?: { delta?: { content?: string } }[]; usage?: unknown };
        content += chunk.choices?.[0]?.delta?.content ?? "";
        if (chunk.usage) usage = true;
      } catch {
        return `bad SSE line: ${line.slice(0, 200)}`;
      }
    }
    if (content !== EXPECTED_REPLY) return `unexpected streamed reply: ${JSON.stringify(content).slice(0, 300)}`;
    if (!usage) return "no usage chunk in the stream";
    if (!text.trimEnd().endsWith("data: [DONE]")) return "stream does not end with data: [DONE]";
  }
  const after = (await stub.stats()).requestCount;
  if (after <= before) return "the answer did not come from the stub (it saw no request)";
  return undefined;
}

async function main(): Promise<number> {
  const startedAt = new Date().toISOString();
  process.on("SIGINT", () => process.exit(130));
  process.on("SIGTERM", () => process.exit(143));

  const log = (s: string) => process.stderr.write(s + "\n");
  log(`bench: ${targetNames.join(", ")} × ${modes.join(", ")}; ${connections} connections, ${durationSec}s per case (+${warmupSec}s warm-up)`);

  const stub = await startStubProcess();
  log(`stub: ${stub.url} (pid ${stub.process.pid})`);

  const cases: CaseResult[] = [];
  const summaries: TargetSummary[] = [];
  let failed = false;

  for (const target of TARGETS.filter((t) => targetNames.includes(t.name))) {
    let running: RunningTarget;
    try {
      const started = await target.start({ stub, model });
      if ("skipped" in started) {
        log(`${target.name}: skipped — ${started.skipped}`);
        summaries.push({ name: target.name, status: "skipped", reason: started.skipped, notes: [] });
        continue;
      }
      running = started;
    } catch (err) {
      failed = true;
      log(`${target.name}: failed to start — ${(err as Error).message}`);
      summaries.push({ name: target.name, status: "failed", reason: (err as Error).message.split("\n")[0], notes: [] });
      continue;
    }
    log(`${target.name}: ${running.chatUrl} (pid ${running.process.pid})`);

    let targetOk = true;
    for (const mode of modes) {
      const problem = await preflight(running, mode, stub);
      if (problem) {
        failed = true;
        targetOk = false;
        log(`${target.name}/${mode}: preflight failed — ${problem}`);
        const tail = running.process.logTail().trim();
        if (tail && running.name !== "direct") log(`--- ${running.process.logPath} (tail) ---\n${tail.slice(-2000)}`);
        cases.push({ target: target.name, mode, error: `preflight failed: ${problem}` });
        continue;
      }
      const load = { url: running.chatUrl, headers: running.headers, body: BODIES[mode], connections };
      if (warmupSec > 0) await runLoad({ ...load, durationSec: warmupSec });
      const before = (await stub.stats()).requestCount;
      log(`${target.name}/${mode}: running ${durationSec}s …`);
      const result = await runLoad({ ...load, durationSec });
      const upstreamRequests = (await stub.stats()).requestCount - before;
      log(`${target.name}/${mode}: ${result.rps} req/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, errors ${result.errors}`);
      cases.push({ target: target.name, mode, result, upstreamRequests });
    }

    const mem = memoryOf(running.process.pid);
    const notes = [...running.notes];
    if (targetOk && running.check) {
      try {
        notes.push(await running.check());
      } catch (err) {
        failed = true;
        targetOk = false;
        notes.push((err as Error).message);
      }
      log(`${target.name}: ${notes[notes.length - 1]}`);
    }
    summaries.push({ name: target.name, status: targetOk ? "ran" : "failed", reason: targetOk ? undefined : notes[notes.length - 1], notes, peakRssMb: mem?.peakRssMb, rssMb: mem?.rssMb });
    await running.stop();
  }

  const stubMem = memoryOf(stub.process.pid);
  await stub.stop();

  const report: Report = {
    startedAt,
    config: { durationSec, warmupSec, connections, model, modes, targets: targetNames },
    machine: { node: process.version, platform: `${process.platform}-${process.arch}`, cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "?", memGb: Math.round(totalmem() / 2 ** 30) },
    targets: summaries,
    cases,
    stub: { peakRssMb: stubMem?.peakRssMb },
    ratios: Object.fromEntries(
      RATIOS.map(([num, den]) => [`${num}/${den}`, computeRatios(cases, modes, num, den)]),
    ),
  };
  console.log("\n" + renderReport(report));
  const file = writeReport(fileURLToPath(new URL("./results", import.meta.url)), report);
  console.log(`\nresults: ${file}`);
  if (failed) console.log(`server logs: ${logDirectory()}`);
  else rmSync(logDirectory(), { recursive: true, force: true });
  return failed ? 1 : 0;
}

process.exitCode = await main();
