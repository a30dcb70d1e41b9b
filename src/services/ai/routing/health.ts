// Per-process health of each (upstream, model): a small circuit breaker. Keyed by model too,
// because one failing model (or one that the upstream rate-limits) says little about the
// upstream's other models.
//   closed    — callable; counts consecutive failures;
//   open      — after K consecutive failures (AI_COOLDOWN_FAILURES, default 3), or a 429 with
//               Retry-After: skipped until the cooldown ends (AI_COOLDOWN_MS, default 30 s, or
//               the Retry-After);
//   half-open — the cooldown is over: exactly one call (the probe) may go; its success closes
//               the circuit, its failure opens it again for another period.
// Health is per process (and per isolate on Workers): each learns on its own traffic, so a
// failing upstream costs every process at most K calls per period. /metrics shows it.
import type { GatewayContext } from '../../../kernel/context.ts';
import { metrics } from '../../../kernel/metrics.ts';
import { circuitEvent } from '../../webhooks/circuit.ts';

interface State {
  failures: number;
  openUntil: number;
  probing: boolean;
}

export type HealthState = 'ok' | 'cooling_down' | 'half_open';

export class Health {
  readonly gw: GatewayContext;
  #s = new Map<string, State>();

  constructor(gw: GatewayContext) {
    this.gw = gw;
  }

  #num(key: string, dflt: number, min: number): number {
    const v = Number(this.gw.env.get(key));
    return Number.isFinite(v) && v >= min ? v : dflt;
  }

  get threshold(): number {
    return Math.floor(this.#num('AI_COOLDOWN_FAILURES', 3, 1));
  }

  get cooldownMs(): number {
    return this.#num('AI_COOLDOWN_MS', 30_000, 0);
  }

  state(key: string, now = Date.now()): HealthState {
    const s = this.#s.get(key);
    if (!s || s.openUntil === 0) return 'ok';
    return now < s.openUntil ? 'cooling_down' : 'half_open';
  }

  /** The models of an upstream that are not 'ok' in this process, with their state. */
  upstreamState(upstreamId: string): Record<string, HealthState> {
    const out: Record<string, HealthState> = {};
    const now = Date.now();
    for (const k of this.#s.keys()) {
      const [u, model] = k.split('\u0000');
      if (u !== upstreamId) continue;
      const st = this.state(k, now);
      if (st !== 'ok') out[model] = st;
    }
    return out;
  }

  /** May a call go to this upstream now? (half-open: only when no probe is out) */
  callable(id: string, now = Date.now()): boolean {
    const s = this.#s.get(id);
    if (!s || s.openUntil === 0) return true;
    return now >= s.openUntil && !s.probing;
  }

  /** When a cooling upstream may be called again (0: now). */
  readyAt(id: string): number {
    const s = this.#s.get(id);
    return s && !s.probing ? s.openUntil : s?.probing ? Infinity : 0;
  }

  /** A call is going to this upstream; when half-open it is the probe. */
  begin(id: string, now = Date.now()): void {
    const s = this.#s.get(id);
    if (s && s.openUntil !== 0 && now >= s.openUntil) s.probing = true;
  }

  success(id: string): void {
    const s = this.#s.get(id);
    if (s) {
      this.#s.delete(id);
      if (s.openUntil !== 0) circuitEvent(this.gw, 'upstream.circuit_closed', ...keyParts(id));
    }
  }

  /** A failed attempt; `retryAfterMs` (a 429's Retry-After) opens the circuit for that long at once. */
  failure(id: string, retryAfterMs?: number, upstream = id.split('\u0000')[0]): void {
    let s = this.#s.get(id);
    if (!s) this.#s.set(id, (s = { failures: 0, openUntil: 0, probing: false }));
    s.failures++;
    const wasProbe = s.probing;
    s.probing = false;
    const now = Date.now();
    const wasClosed = s.openUntil === 0;
    if (retryAfterMs !== undefined && retryAfterMs > 0) {
      s.openUntil = Math.max(s.openUntil, now + retryAfterMs);
      if (wasClosed) circuitEvent(this.gw, 'upstream.circuit_opened', ...keyParts(id), { failures: s.failures, open_until: new Date(s.openUntil).toISOString() });
      return;
    }
    if (wasProbe || s.failures >= this.threshold) {
      s.openUntil = now + this.cooldownMs;
      metrics().cooldowns.inc({ upstream });
      if (wasClosed) circuitEvent(this.gw, 'upstream.circuit_opened', ...keyParts(id), { failures: s.failures, open_until: new Date(s.openUntil).toISOString() });
    }
  }

  /** Forget an upstream's history for every model (it was changed or removed). */
  reset(upstreamId: string): void {
    for (const k of [...this.#s.keys()]) if (k.split('\u0000')[0] === upstreamId) this.#s.delete(k);
  }

  /** A call to the probe ended without a verdict (client gone, input error): let another probe go. */
  release(id: string): void {
    const s = this.#s.get(id);
    if (s) s.probing = false;
  }
}

const healths = new WeakMap<GatewayContext, Health>();

export function healthOf(gw: GatewayContext): Health {
  let h = healths.get(gw);
  if (!h) healths.set(gw, (h = new Health(gw)));
  return h;
}

const keyParts = (id: string): [string, string] => {
  const [u, model] = id.split('\u0000');
  return [u, model ?? ''];
};

/** The health key of an upstream serving a model. */
export const healthKey = (upstreamId: string, modelId: string) => `${upstreamId}\u0000${modelId}`;
