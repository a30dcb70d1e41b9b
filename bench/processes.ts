// Child processes for the benchmark: every server (stub, each gateway) runs in its own
// process, on the same Node as the harness (process.execPath), so none shares the load
// generator's event loop.
import { execFileSync, fork, spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, fstatSync } from "node:fs";
import { createServer } from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";

export type ServerProcess = {
  name: string;
  pid: number;
  child: ChildProcess;
  /** stdout + stderr of the process go to this file (not through the harness's event loop). */
  logPath: string;
  /** The last few KB of that file. */
  logTail(): string;
  stop(): Promise<void>;
};

// BENCH_GATEWAY_CPUS=1 (a taskset CPU list): each gateway runs on those CPUs, and the harness (the
// load generator) and the stub on the others. Then what a gateway costs in CPU decides its req/s,
// not how the scheduler shares cores among it, the load generator and the stub (a gateway that
// sends bigger responses makes the load generator work harder, which unpinned shows up as the
// gateway's slowness). Linux only (taskset, from util-linux).
const GATEWAY_CPUS = process.env.BENCH_GATEWAY_CPUS;

/** Pins a process and all its threads (those it starts later inherit it). */
function pin(pid: number, cpus: string): void {
  execFileSync("taskset", ["-a", "-c", "-p", cpus, String(pid)], { stdio: "ignore" });
}

/** A CPU list as taskset and /proc write it ("0-3,6"), as numbers. */
const cpusOf = (list: string): number[] =>
  list.split(",").flatMap((part) => {
    const [a, b] = part.split("-").map(Number);
    return Array.from({ length: (b ?? a) - a + 1 }, (_, i) => a + i);
  });

/**
 * The CPUs this process may run on, read before anything is pinned: a container's cpuset need
 * not be 0..n−1. Where /proc does not say, 0..n−1.
 */
const ALLOWED_CPUS: number[] = (() => {
  try {
    const line = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync("/proc/self/status", "utf8"));
    if (line) return cpusOf(line[1]);
  } catch {
    /* not Linux: as below */
  }
  return Array.from({ length: availableParallelism() }, (_, i) => i);
})();

/**
 * Runs `gateways` on the last allowed CPU and `others` on the rest until the returned function
 * is called, which lets all of them run on every allowed CPU again; with one CPU, does nothing.
 */
export function pinApart(gateways: number[], others: number[]): () => void {
  const cpus = ALLOWED_CPUS;
  if (cpus.length < 2) return () => {};
  for (const pid of gateways) pin(pid, String(cpus.at(-1)));
  for (const pid of others) pin(pid, cpus.slice(0, -1).join(","));
  return () => {
    for (const pid of [...gateways, ...others]) pin(pid, cpus.join(","));
  };
}

if (GATEWAY_CPUS) {
  const gateway = new Set(cpusOf(GATEWAY_CPUS));
  const rest = ALLOWED_CPUS.filter((c) => !gateway.has(c));
  if (rest.length === 0) throw new Error(`BENCH_GATEWAY_CPUS=${GATEWAY_CPUS} leaves no CPU for the load generator`);
  pin(process.pid, rest.join(","));
}

export type SpawnOptions = {
  name: string;
  /** A gateway under test: runs on BENCH_GATEWAY_CPUS when that is set. */
  gateway?: boolean;
  /** Arguments after the node executable, e.g. [script, "serve"]. */
  args: string[];
  /** Extra node flags, e.g. ["--import", "./preload.ts"]. */
  nodeArgs?: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Use fork() and an IPC channel. */
  ipc?: boolean;
  /** Called right after the process is created (e.g. to listen for IPC messages). */
  onSpawn?: (child: ChildProcess) => void;
  /** Resolves when the server is ready; polled until it returns true. */
  ready: () => Promise<boolean>;
  timeoutMs?: number;
};

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

const LOG_TAIL = 8192;
let logDir: string | undefined;

/** The directory holding every server's log file for this run. */
export function logDirectory(): string {
  logDir ??= mkdtempSync(join(tmpdir(), "citygate-bench-logs-"));
  return logDir;
}

/** The end of a tool's run: the servers' logs are removed, or kept and their directory printed with BENCH_KEEP_LOGS=1. */
export function removeLogDirectory(): void {
  if (process.env.BENCH_KEEP_LOGS === "1") console.log(`server logs: ${logDirectory()}`);
  else rmSync(logDirectory(), { recursive: true, force: true });
}

function readTail(path: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const size = fstatSync(fd).size;
    const len = Math.min(size, LOG_TAIL);
    const buf = Buffer.alloc(len);
    readSync(fd, buf, 0, len, size - len);
    return buf.toString("utf8");
  } catch {
    return "";
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export async function spawnServer(opts: SpawnOptions): Promise<ServerProcess> {
  const env = { ...process.env, ...opts.env };
  // Output goes straight to a file: a chatty server (request logs) must not cost the load
  // generator, which runs in this process, any CPU.
  // (a second server of the same name, as in a paired run, gets its own file)
  let logPath = join(logDirectory(), `${opts.name}.log`);
  for (let n = 2; existsSync(logPath); n++) logPath = join(logDirectory(), `${opts.name}-${n}.log`);
  const out = openSync(logPath, "w");
  const child = opts.ipc
    ? fork(opts.args[0], opts.args.slice(1), { execPath: process.execPath, execArgv: opts.nodeArgs ?? [], env, cwd: opts.cwd, stdio: ["ignore", out, out, "ipc"] })
    : spawn(process.execPath, [...(opts.nodeArgs ?? []), ...opts.args], { env, cwd: opts.cwd, stdio: ["ignore", out, out] });
  closeSync(out);
  live.add(child);
  if (opts.gateway && GATEWAY_CPUS && child.pid) pin(child.pid, GATEWAY_CPUS);
  opts.onSpawn?.(child);
  const tail = () => readTail(logPath);
  let exited: string | undefined;
  const exitPromise = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      exited = `exited with ${signal ?? code}`;
      live.delete(child);
      resolve();
    });
  });

  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  for (;;) {
    if (exited) throw new Error(`${opts.name} ${exited} before it was ready:\n${tail()}`);
    if (await opts.ready().catch(() => false)) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${opts.name} was not ready within ${opts.timeoutMs ?? 20_000} ms:\n${tail()}`);
    }
    await sleep(50);
  }

  return {
    name: opts.name,
    pid: child.pid!,
    child,
    logPath,
    logTail: tail,
    async stop() {
      if (exited) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exitPromise;
      clearTimeout(timer);
    },
  };
}

/** A process's user and system CPU time so far, in clock ticks (USER_HZ: 100 a second). Linux only. */
export function cpuTicks(pid: number): { user: number; sys: number } {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return { user: Number(f[11]), sys: Number(f[12]) };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A TCP port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** True once anything answers HTTP at url (any status counts: the server is up). */
export async function answersHttp(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return true;
  } catch {
    return false;
  }
}

/** Peak (VmHWM) and current (VmRSS) resident set size of a live process, in MB. */
export function memoryOf(pid: number): { peakRssMb: number; rssMb: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
    return { peakRssMb: round1(kb("VmHWM") / 1024), rssMb: round1(kb("VmRSS") / 1024) };
  } catch {
    return undefined;
  }
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}
