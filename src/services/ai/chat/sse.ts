// Relays an upstream chat/completions event stream to the client byte for byte, reading the
// usage on the way. The one event that carries a usage object is parsed (JSON) — nothing
// else is decoded. When citygate asked the upstream for usage the client did not ask for,
// that event is removed (an event with empty `choices`) or its `usage` dropped, so the client
// sees what the upstream would have sent it.

const enc = new TextEncoder();
const dec = new TextDecoder();
const USAGE = enc.encode('"usage"');
const DATA = enc.encode('data:');

export interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

export interface RelayEnd {
  usage: ChatUsage | null;
  /** `data:` events seen (≈ output tokens when the upstream reported none). */
  events: number;
  /** The client went away before the end. */
  aborted: boolean;
  error?: unknown;
}

export function indexOfBytes(hay: Uint8Array, needle: Uint8Array, from = 0): number {
  const first = needle[0];
  const last = hay.length - needle.length;
  for (let i = hay.indexOf(first, from); i !== -1 && i <= last; i = hay.indexOf(first, i + 1)) {
    let j = 1;
    while (j < needle.length && hay[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

function countBytes(hay: Uint8Array, needle: Uint8Array): number {
  let n = 0;
  for (let i = indexOfBytes(hay, needle); i !== -1; i = indexOfBytes(hay, needle, i + needle.length)) n++;
  return n;
}

/** True when the bytes contain `"usage"` followed by an object (not null). */
function hasUsageObject(b: Uint8Array): boolean {
  for (let i = indexOfBytes(b, USAGE); i !== -1; i = indexOfBytes(b, USAGE, i + USAGE.length)) {
    let k = i + USAGE.length;
    while (k < b.length && (b[k] === 32 || b[k] === 9 || b[k] === 58 /* : */ || b[k] === 10 || b[k] === 13)) k++;
    if (b[k] === 123 /* { */) return true;
  }
  return false;
}

/** End of the last complete event (just past its blank line), or 0. */
function lastBoundary(b: Uint8Array): number {
  for (let i = b.length - 1; i > 0; i--) {
    if (b[i] !== 10) continue;
    if (b[i - 1] === 10) return i + 1;
    if (b[i - 1] === 13 && i > 2 && b[i - 2] === 10) return i + 1;
  }
  return 0;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/**
 * Reads usage objects out of complete events; when `strip`, returns the events without the
 * usage citygate added, else null (pass the bytes on unchanged).
 */
function takeUsage(block: Uint8Array, strip: boolean, found: (u: ChatUsage) => void): Uint8Array | null {
  const text = dec.decode(block);
  const events = text.split(/(?<=\r?\n\r?\n)/);
  let changed = false;
  const out: string[] = [];
  for (const ev of events) {
    const m = /^data:\s?(.*)$/m.exec(ev);
    if (!m || !ev.includes('"usage"')) {
      out.push(ev);
      continue;
    }
    let obj: any;
    try {
      obj = JSON.parse(m[1]);
    } catch {
      out.push(ev);
      continue;
    }
    if (obj && typeof obj === 'object' && obj.usage && typeof obj.usage === 'object') {
      found(obj.usage as ChatUsage);
      if (strip) {
        changed = true;
        if (Array.isArray(obj.choices) && obj.choices.length === 0) continue; // the extra usage event
        delete obj.usage;
        out.push(`data: ${JSON.stringify(obj)}\n\n`);
        continue;
      }
    }
    out.push(ev);
  }
  return changed ? enc.encode(out.join('')) : null;
}

export function relaySse(
  src: AsyncIterable<Uint8Array>,
  opts: { strip: boolean; onEnd(r: RelayEnd): void; errorEvent(e: unknown): string },
): ReadableStream<Uint8Array> {
  const it = src[Symbol.asyncIterator]();
  let pending: Uint8Array = new Uint8Array(0);
  let usage: ChatUsage | null = null;
  let events = 0;
  let ended = false;
  const end = (r: Omit<RelayEnd, 'usage' | 'events'>) => {
    if (ended) return;
    ended = true;
    opts.onEnd({ usage, events, ...r });
  };
  const found = (u: ChatUsage) => void (usage = u);

  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        for (;;) {
          let next: IteratorResult<Uint8Array>;
          try {
            next = await it.next();
          } catch (e) {
            if (ended) return;
            const rest = pending;
            pending = new Uint8Array(0);
            if (rest.length) controller.enqueue(rest);
            controller.enqueue(enc.encode(opts.errorEvent(e)));
            controller.close();
            end({ aborted: false, error: e });
            return;
          }
          if (next.done) {
            if (pending.length) {
              events += countBytes(pending, DATA);
              const changed = hasUsageObject(pending) ? takeUsage(pending, opts.strip, found) : null;
              controller.enqueue(changed ?? pending);
              pending = new Uint8Array(0);
            }
            controller.close();
            end({ aborted: false });
            return;
          }
          const chunk = next.value;
          if (!opts.strip) {
            // Pass the chunk on at once; keep only the unfinished event to scan it whole later.
            const all = concat(pending, chunk);
            const b = lastBoundary(all);
            if (b > 0) {
              const done = all.subarray(0, b);
              events += countBytes(done, DATA);
              if (hasUsageObject(done)) takeUsage(done, false, found);
            }
            pending = all.slice(b);
            controller.enqueue(chunk);
            return;
          }
          const all = concat(pending, chunk);
          const b = lastBoundary(all);
          if (b === 0) {
            pending = all;
            continue; // nothing complete yet
          }
          const done = all.subarray(0, b);
          pending = all.slice(b);
          events += countBytes(done, DATA);
          const changed = hasUsageObject(done) ? takeUsage(done, true, found) : null;
          const out = changed ?? done;
          if (out.length === 0) continue;
          controller.enqueue(out);
          return;
        }
      },
      async cancel() {
        end({ aborted: true });
        await it.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}
