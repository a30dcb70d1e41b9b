// How upstream failures reach callers (issue: errors). Upstream 5xx or connection failure →
// 502, timeout → 504, an upstream 4xx caused by the input → 400 with the upstream's reason,
// the upstream refusing citygate's own key → 502 (the caller cannot fix it), upstream rate
// limit → 429. Messages never carry credentials.
import { CLIENT_CLOSED, GatewayError, isGatewayError } from '../../../kernel/errors.ts';
import { openStreams, type AbortSource, type OpenStream } from '../../../kernel/http.ts';
import { redactSecrets } from '../../../kernel/redact.ts';
import { isSdkError } from './sdk.ts';

export class UpstreamStatusError extends Error {
  readonly status: number;
  readonly body: string;
  /** The upstream's Retry-After (or retry-after-ms) header, when it sent one. */
  readonly retryAfter: string | undefined;
  constructor(status: number, body: string, retryAfter?: string) {
    super(`upstream answered ${status}`);
    this.status = status;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

/** Milliseconds to wait from a Retry-After value (delta-seconds or an HTTP date), or undefined. */
export function parseRetryAfter(v: string | null | undefined, ms?: string | null): number | undefined {
  const m = Number(ms);
  if (ms && Number.isFinite(m) && m >= 0) return m;
  if (!v) return undefined;
  const s = Number(v);
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const t = Date.parse(v);
  return Number.isFinite(t) ? Math.max(0, t - Date.now()) : undefined;
}

/** The Retry-After of whatever an upstream call threw (a status error or the AI SDK's APICallError), in ms. */
export function retryAfterOf(e: unknown): number | undefined {
  for (let x: any = e, i = 0; x && i < 4; x = x.cause, i++) {
    if (x instanceof UpstreamStatusError) return parseRetryAfter(x.retryAfter);
    if (isSdkError(x, 'AI_APICallError')) {
      const h = (x.responseHeaders ?? {}) as Record<string, string>;
      return parseRetryAfter(h['retry-after'], h['retry-after-ms']);
    }
  }
  return undefined;
}

/** An abort signal for one upstream call: the client's signal plus a deadline. */
export interface Deadline extends AbortSource {
  /** An AbortSignal that follows the deadline (made when first read: the pass-through never needs one). */
  readonly signal: AbortSignal;
  timedOut(): boolean;
  /** Why it expired: no first byte in time, no byte for the idle time, or the gateway stopping. */
  readonly expired: 'first_byte' | 'idle' | 'shutdown' | null;
  clientGone(): boolean;
  /**
   * The upstream's stream began (its first byte): the first-byte deadline stops, and the
   * stream's idle deadline (AI_STREAM_IDLE_TIMEOUT_MS) starts; it keeps following the client.
   * Until clear(), the stream is one the gateway ends when it stops (endOpenStreams).
   */
  stopTimer(): void;
  /** A byte arrived (the upstream client calls it per chunk): the idle deadline counts from now. */
  touch(): void;
  /** The upstream client paused reading (a slow client): the idle deadline waits for the next touch(). */
  hold(): void;
  /** Aborts the upstream call (the client went away). */
  abort(): void;
  clear(): void;
}

export function deadline(client: AbortSignal | undefined, ms: number, idleMs = 0): Deadline {
  return new CallDeadline(client, ms, idleMs);
}

/**
 * The idle deadline's one timer per stream, re-armed lazily: a chunk only records its time
 * (touch), and when the timer fires it either ends the stream or waits for the rest of the
 * idle time since the last byte. No timer is made or moved per chunk.
 */
function checkIdle(d: CallDeadline): void {
  d.checkIdle();
}

/**
 * Every upstream attempt makes one, so it is cheap where it can be: one timer, one listener on
 * the client's signal, and no AbortController unless `signal` is read. The Node upstream client
 * listens to it directly (AbortSource, an EventEmitter shape: a listener on an AbortSignal costs
 * several times more).
 */
class CallDeadline implements Deadline, OpenStream {
  #client: AbortSignal | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #ac: AbortController | null = null;
  #timed = false;
  #idleMs: number;
  /** performance.now() of the last byte, once streaming (0 before). */
  #last = 0;
  /** Reading is paused for a slow client: the upstream is not late. */
  #held = false;
  expired: 'first_byte' | 'idle' | 'shutdown' | null = null;
  #aborted = false;
  #reason: unknown = undefined;
  #listeners: (() => void)[] | null = null;
  readonly #onClient = () => this.#abort(this.#client?.reason);

  constructor(client: AbortSignal | undefined, ms: number, idleMs: number) {
    this.#client = client;
    this.#idleMs = idleMs;
    this.#timer = setTimeout(() => this.#expire(), ms);
    if (client?.aborted) this.#abort(client.reason);
    else client?.addEventListener('abort', this.#onClient, { once: true });
  }

  #expire(why: 'first_byte' | 'idle' | 'shutdown' = 'first_byte'): void {
    if (this.#aborted) return;
    this.#timed = true;
    this.expired = why;
    this.#abort(new DOMException(why === 'shutdown' ? 'gateway stopping' : 'upstream timeout', 'TimeoutError'));
  }

  checkIdle(): void {
    if (this.#held) {
      this.#timer = setTimeout(checkIdle, this.#idleMs, this);
      return;
    }
    const quiet = performance.now() - this.#last;
    // timers may fire a fraction of a millisecond early
    if (quiet >= this.#idleMs - 1) this.#expire('idle');
    else this.#timer = setTimeout(checkIdle, this.#idleMs - quiet, this);
  }

  /** The gateway stops (drain deadline passed): the stream ends with its API's error event. */
  end(): void {
    this.#expire('shutdown');
  }

  #abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#ac?.abort(reason);
    const ls = this.#listeners;
    this.#listeners = null;
    if (ls) for (const f of ls) f();
  }

  get signal(): AbortSignal {
    if (!this.#ac) {
      this.#ac = new AbortController();
      if (this.#aborted) this.#ac.abort(this.#reason);
    }
    return this.#ac.signal;
  }

  get isAborted(): boolean {
    return this.#aborted;
  }
  get reason(): unknown {
    return this.#reason;
  }
  on(_event: 'abort', fn: () => void): this {
    if (this.#aborted) queueMicrotask(fn);
    else (this.#listeners ??= []).push(fn);
    return this;
  }
  once(event: 'abort', fn: () => void): this {
    return this.on(event, fn); // every listener runs once: there is one abort
  }
  removeListener(_event: 'abort', fn: () => void): this {
    const ls = this.#listeners;
    const i = ls ? ls.indexOf(fn) : -1;
    if (i !== -1) ls!.splice(i, 1);
    return this;
  }

  timedOut(): boolean {
    return this.#timed;
  }
  clientGone(): boolean {
    return !!this.#client?.aborted;
  }
  stopTimer(): void {
    clearTimeout(this.#timer);
    if (this.#aborted || this.#last !== 0) return;
    this.#last = performance.now();
    openStreams.add(this);
    if (this.#idleMs > 0) this.#timer = setTimeout(checkIdle, this.#idleMs, this);
  }
  touch(): void {
    if (this.#last !== 0) this.#last = performance.now();
    this.#held = false;
  }
  hold(): void {
    this.#held = true;
  }
  abort(): void {
    this.#abort(new DOMException('client closed', 'AbortError'));
  }
  clear(): void {
    clearTimeout(this.#timer);
    if (this.#last !== 0) openStreams.delete(this);
    this.#client?.removeEventListener('abort', this.#onClient);
  }
}

/** The upstream's own reason, from an OpenAI/Anthropic/Google-shaped error body. */
export function upstreamReason(body: string | undefined): string {
  if (!body) return '';
  try {
    const j = JSON.parse(body);
    const e = Array.isArray(j) ? j[0]?.error : j?.error;
    const m = typeof e === 'string' ? e : e?.message ?? j?.message ?? j?.detail;
    if (typeof m === 'string') return m.slice(0, 1000);
  } catch {
    /* not JSON */
  }
  return body.slice(0, 300);
}

/** Google answers a wrong API key with 400 INVALID_ARGUMENT, not 401: its ErrorInfo says API_KEY_INVALID. */
function isGoogleKeyRejection(body: string | undefined): boolean {
  if (!body || !body.includes('API_KEY_INVALID')) return false;
  try {
    const j = JSON.parse(body);
    const details = (Array.isArray(j) ? j[0] : j)?.error?.details;
    return Array.isArray(details) && details.some((d) => d?.reason === 'API_KEY_INVALID');
  } catch {
    return false;
  }
}

export function fromUpstreamStatus(status: number, body: string | undefined): GatewayError {
  // an upstream may quote a key (its own, or one it was sent): never relayed
  const reason = redactSecrets(upstreamReason(body));
  if (status === 429) return new GatewayError(429, 'upstream_rate_limited', `The upstream provider is rate limiting: ${reason || 'try again later'}`);
  // A refused key is citygate's to fix, not the caller's (and another upstream may take the
  // call), even when the upstream says it with a 400 as Google does.
  if (status === 401 || status === 403 || (status === 400 && isGoogleKeyRejection(body))) {
    return new GatewayError(502, 'upstream_auth_failed', 'The upstream provider refused the gateway’s credentials.');
  }
  if (status === 408 || status === 504) return new GatewayError(504, 'upstream_timeout', 'The upstream provider timed out.');
  if (status >= 400 && status < 500) {
    return new GatewayError(400, 'upstream_rejected', reason ? `The upstream provider rejected the request: ${reason}` : 'The upstream provider rejected the request.');
  }
  return new GatewayError(502, 'upstream_error', `The upstream provider failed (${status})${reason ? `: ${reason}` : '.'}`);
}

export { CLIENT_CLOSED };

/** Maps anything an upstream call threw to the one error shape. */
export function toGatewayError(e: unknown, d?: Deadline): GatewayError {
  if (isGatewayError(e)) return e;
  if (d?.expired === 'idle') return new GatewayError(504, 'upstream_stream_idle', 'The upstream stream sent nothing for too long (AI_STREAM_IDLE_TIMEOUT_MS); it was ended.');
  if (d?.expired === 'shutdown') return new GatewayError(503, 'gateway_stopping', 'The gateway is stopping (a restart or deploy) and ended this stream; try again.', { headers: { 'retry-after': '1' } });
  if (d?.timedOut()) return new GatewayError(504, 'upstream_timeout', 'The upstream provider did not answer in time.');
  if (d?.clientGone()) return new GatewayError(499, CLIENT_CLOSED, 'The client closed the request.');
  if (e instanceof UpstreamStatusError) return fromUpstreamStatus(e.status, e.body);
  if (isSdkError(e, 'AI_APICallError')) {
    if (e.statusCode) return fromUpstreamStatus(e.statusCode, e.responseBody);
    return new GatewayError(502, 'upstream_unavailable', 'The upstream provider could not be reached.');
  }
  // An error the upstream reported inside a stream it had begun (Google's {"error": …} event):
  // mapped by the status it carries, like the same error before the stream.
  if (isSdkError(e, 'AI_StreamProviderError') && e.statusCode) return fromUpstreamStatus(e.statusCode, JSON.stringify({ error: { message: e.message } }));
  const cause = (e as { cause?: unknown })?.cause;
  if (cause && cause !== e && (isSdkError(cause, 'AI_APICallError') || cause instanceof UpstreamStatusError)) return toGatewayError(cause, d);
  const name = (e as { name?: string })?.name ?? '';
  // The caller's content, not the upstream: never retried, never counted against an upstream.
  if (name === 'AI_DownloadError') return new GatewayError(400, 'input_unreadable', 'A URL in the input could not be read.');
  if (CALLERS_INPUT.has(name)) return new GatewayError(400, 'invalid_input', `The input could not be converted for the upstream (${name}).`);
  if (name === 'TimeoutError') return new GatewayError(504, 'upstream_timeout', 'The upstream provider did not answer in time.');
  if (/^AI_/.test(name)) {
    // The AI SDK could not make sense of what the upstream sent.
    return new GatewayError(502, 'upstream_error', `The upstream provider sent an unusable response (${name}).`);
  }
  if (isNetworkError(e)) return new GatewayError(502, 'upstream_unavailable', 'The upstream provider could not be reached.');
  throw e; // not an upstream failure: a bug, reported as one
}

/** AI SDK errors about the caller's messages, raised before anything is sent upstream. */
const CALLERS_INPUT = new Set(['AI_InvalidDataContentError', 'AI_InvalidPromptError', 'AI_InvalidMessageRoleError', 'AI_MessageConversionError', 'AI_MissingToolResultsError']);

function isNetworkError(e: unknown): boolean {
  for (let x: any = e, i = 0; x && i < 4; x = x.cause, i++) {
    if (typeof x.code === 'string' && /^(E[A-Z]+|UND_ERR.*)$/.test(x.code)) return true;
    if (x instanceof TypeError && /fetch failed|network|terminated/i.test(String(x.message))) return true;
    if (x.name === 'AbortError' || x.name === 'SocketError') return true;
  }
  return false;
}
