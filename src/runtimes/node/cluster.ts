// GATEWAY_WORKERS=N (or auto = one per core): N worker processes share one port through
// node:cluster, on SQLite or PostgreSQL. Nothing in a worker is correct only in one process
// (migrations, first-boot keys, money batches, job leases, caches with a 3 s bound), so the
// primary only supervises:
//   - forks N workers and prints one "listening" line once all of them listen;
//   - restarts a worker that dies (after a short back-off when it dies young, so a worker that
//     cannot start does not spin the CPU; when workers keep dying before any listened, it exits 1);
//   - on SIGTERM/SIGINT, stops restarting and sends SIGTERM to every worker, which drains as
//     one process does (server.ts: readiness false, Connection: close, in-flight work up to
//     SHUTDOWN_TIMEOUT_MS, then usage, charges and leases written); a worker still alive
//     SHUTDOWN_TIMEOUT_MS + 20 s later is killed, and then the primary exits 1, else 0 (a worker
//     still booting, which the signal ends before its handler exists, served nothing: clean). A
//     worker whose primary disappears (SIGKILL) stops itself the same way.
//   - at boot, the primary (not each worker) waits for PostgreSQL (DATABASE_CONNECT_TIMEOUT_S).
//
// Cross-worker hook: askWorkers(type, payload) in the primary sends one IPC message to every
// worker and collects their answers (answerPrimary(type, handler) in the worker registers the
// handler); e.g. metrics can be summed across workers this way. prom-client's
// AggregatorRegistry also works over this same cluster IPC channel, as is.
import { serveClusterMetrics } from './metrics.ts';
import cluster, { type Worker } from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { describeDatabase, type NodeConfig } from './config.ts';

const READY = 'citygate:listening';
const ASK = 'citygate:ask';
const ANSWER = 'citygate:answer';
const YOUNG_MS = 5000;
/** Beyond SHUTDOWN_TIMEOUT_MS: what a worker's final writes may take before it is killed. */
const STOP_GRACE_MS = 20_000;

interface Msg {
  type?: string;
  id?: string;
  ask?: string;
  payload?: unknown;
  url?: string;
  ok?: boolean;
  value?: unknown;
  error?: string;
}

export interface Primary {
  /** Resolves when every worker has exited after a stop: true when each stopped by itself, false when one was killed. */
  stopped: Promise<boolean>;
  stop(signal?: NodeJS.Signals): Promise<boolean>;
}

/** The primary of GATEWAY_WORKERS: forks, restarts, stops. */
export function startPrimary(config: NodeConfig, opts: { installSignals?: boolean; out?: (line: string) => void } = {}): Primary {
  const out = opts.out ?? ((l: string) => process.stderr.write(`${l}\n`));
  const born = new Map<Worker, number>();
  let stopping = false;
  let announced = false;
  let deadBeforeReady = 0;
  const ready = new Set<Worker>();
  let killed = 0;
  let unclean = 0;
  let resolveStopped!: (clean: boolean) => void;
  const stopped = new Promise<boolean>((r) => (resolveStopped = r));

  const fork = () => {
    const w = cluster.fork({ CITYGATE_CLUSTER_WORKER: '1' });
    born.set(w, Date.now());
    w.on('message', (m: Msg) => {
      if (m?.type === READY) {
        ready.add(w);
        if (!announced && ready.size >= config.workers) {
          announced = true;
          out(`citygate listening on ${m.url} (${config.workers} workers, database ${describeDatabase(config)})`);
        }
      }
    });
  };

  cluster.on('exit', (w, code, signal) => {
    const at = born.get(w) ?? 0;
    born.delete(w);
    const wasReady = ready.delete(w);
    if (stopping) {
      // A worker still booting (a replacement, say) has served nothing and holds nothing: that
      // SIGTERM ends it before its own handler is installed is no unclean stop.
      if (code !== 0 && wasReady) {
        unclean++;
        out(`citygate: worker ${w.process.pid} exited (${signal ?? code}) while stopping`);
      }
      if (born.size === 0) resolveStopped(killed === 0 && unclean === 0);
      return;
    }
    if (!announced && ++deadBeforeReady >= config.workers + 2) {
      // No worker ever started (an unreachable database, a bad setting): do not spin; fail like one process would.
      out(`citygate: workers exit before listening (last: ${signal ?? code}); giving up`);
      void stop('SIGTERM').then(() => process.exit(1));
      return;
    }
    out(`citygate: worker ${w.process.pid} exited (${signal ?? code}); starting another`);
    const young = Date.now() - at < YOUNG_MS;
    setTimeout(fork, young ? 1000 : 0);
  });

  // GET /metrics on any worker answers the sum over all workers (prom-client's AggregatorRegistry here).
  serveClusterMetrics();
  for (let i = 0; i < config.workers; i++) fork();

  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (!stopping) {
      stopping = true;
      if (born.size === 0) resolveStopped(true);
      for (const w of born.keys()) w.process.kill(signal);
      const force = setTimeout(() => {
        for (const w of born.keys()) {
          killed++;
          out(`citygate: worker ${w.process.pid} did not stop in time; killing it`);
          w.process.kill('SIGKILL');
        }
      }, config.shutdownTimeoutMs + STOP_GRACE_MS);
      force.unref();
    }
    return stopped;
  };

  if (opts.installSignals) {
    const onSignal = (sig: NodeJS.Signals) => {
      if (stopping) return; // the drain is under way (a second Ctrl-C or SIGTERM changes nothing)
      out(`citygate: ${sig}: draining ${born.size} workers`);
      void stop('SIGTERM').then((clean) => process.exit(clean ? 0 : 1));
    };
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
  }
  return { stopped, stop };
}

/** In a worker: tells the primary this worker listens at `url`. */
export function announceWorker(url: string): void {
  process.send?.({ type: READY, url });
}

/** In a worker: stop when the primary is gone (its IPC channel closed). */
export function stopWithPrimary(stop: () => Promise<void>): void {
  process.once('disconnect', () => {
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}

const handlers = new Map<string, (payload: unknown) => unknown>();
let listening = false;

/** In a worker: answers the primary's askWorkers(type, …) with `handler`. */
export function answerPrimary(type: string, handler: (payload: unknown) => unknown): void {
  handlers.set(type, handler);
  if (listening || !process.send) return;
  listening = true;
  process.on('message', async (m: Msg) => {
    if (m?.type !== ASK || !m.id || !m.ask) return;
    const h = handlers.get(m.ask);
    try {
      if (!h) throw new Error(`no handler for '${m.ask}'`);
      process.send!({ type: ANSWER, id: m.id, ok: true, value: await h(m.payload) });
    } catch (e) {
      process.send!({ type: ANSWER, id: m.id, ok: false, error: String((e as Error)?.message ?? e) });
    }
  });
}

/** In the primary: asks every live worker and collects the answers (a worker that fails or is slow is left out). */
export async function askWorkers(type: string, payload?: unknown, timeoutMs = 5000): Promise<unknown[]> {
  const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && w.isConnected());
  const answers = await Promise.all(
    workers.map(
      (w) =>
        new Promise<{ ok: boolean; value?: unknown }>((resolve) => {
          const id = randomUUID();
          const timer = setTimeout(() => done({ ok: false }), timeoutMs);
          const onMsg = (m: Msg) => {
            if (m?.type === ANSWER && m.id === id) done({ ok: !!m.ok, value: m.value });
          };
          const done = (r: { ok: boolean; value?: unknown }) => {
            clearTimeout(timer);
            w.off('message', onMsg);
            resolve(r);
          };
          w.on('message', onMsg);
          w.send({ type: ASK, id, ask: type, payload });
        }),
    ),
  );
  return answers.filter((a) => a.ok).map((a) => a.value);
}
