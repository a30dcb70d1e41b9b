// Relays an upstream chat/completions event stream to the client byte for byte, reading the
// usage on the way. The one event that carries a usage object is parsed (JSON) — nothing
// else is decoded. When citygate asked the upstream for usage the client did not ask for,
// that event is removed (an event with empty `choices`) or its `usage` dropped, so the client
// sees what the upstream would have sent it.

const enc = new TextEncoder();
const dec = new TextDecoder();
const USAGE = enc.encode('"usage"');
const USAGE_ANCHOR = 4; // the 'g': rare in chat chunks, unlike the quote

export interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
}

export interface RelayEnd {
  usage: ChatUsage | null;
  /** `data:` lines with a JSON payload seen (not `[DONE]`): one per event, the estimate's basis when the upstream reported no usage (counted only until a usage is found). */
  events: number;
  /** The client went away before the end. */
  aborted: boolean;
  error?: unknown;
}

/**
 * First index of `needle` in `hay` at or after `from`, or -1. Candidates are found by the
 * native search for one byte of the needle, `anchor` (its index in the needle): pick a byte
 * that is rare in the haystack (not the quote, which is everywhere in JSON).
 */
export function indexOfBytes(hay: Uint8Array, needle: Uint8Array, from = 0, anchor = 0): number {
  const a = needle[anchor];
  const last = hay.length - needle.length;
  for (let p = hay.indexOf(a, from + anchor); p !== -1; p = hay.indexOf(a, p + 1)) {
    const i = p - anchor;
    if (i > last) return -1;
    let j = 0;
    while (j < needle.length && hay[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

/** `data:` lines with a JSON object in a run of complete events (which starts at an event's first line). */
function countDataLines(b: Uint8Array): number {
  let n = startsWithData(b, 0) ? 1 : 0;
  for (let i = b.indexOf(10); i !== -1; i = b.indexOf(10, i + 1)) if (startsWithData(b, i + 1)) n++;
  return n;
}
const startsWithData = (b: Uint8Array, i: number) =>
  b[i] === 100 && b[i + 1] === 97 && b[i + 2] === 116 && b[i + 3] === 97 && b[i + 4] === 58 && // "data:"
  (b[i + 5] === 123 || (b[i + 5] === 32 && b[i + 6] === 123)); // then "{" or " {" (not [DONE])

/**
 * indexOfBytes from the end: the last index of `needle` in `hay` at or before `lastStart`, or -1.
 * Candidates are found by the native search backwards for the needle's `anchor` byte.
 */
function lastIndexOfBytes(hay: Uint8Array, needle: Uint8Array, lastStart: number, anchor = 0): number {
  const a = needle[anchor];
  // p > anchor - 1 always: a negative start would make lastIndexOf count from the end
  for (let p = lastStart + anchor; p >= anchor; p--) {
    p = hay.lastIndexOf(a, p);
    if (p < anchor) return -1;
    const i = p - anchor;
    let j = 0;
    while (j < needle.length && hay[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

/** Index of the '{' that opens the value of the `"usage"` at `i` (past blanks and the colon), or -1 (null, say). */
function objectAfterUsage(b: Uint8Array, i: number): number {
  let k = i + USAGE.length;
  while (k < b.length && (b[k] === 32 || b[k] === 9 || b[k] === 58 /* : */ || b[k] === 10 || b[k] === 13)) k++;
  return b[k] === 123 /* { */ ? k : -1;
}

/** Index of the next `"usage"` followed by an object (not null) from `from`, or -1. */
function nextUsageObject(b: Uint8Array, from = 0): number {
  for (let i = indexOfBytes(b, USAGE, from, USAGE_ANCHOR); i !== -1; i = indexOfBytes(b, USAGE, i + USAGE.length, USAGE_ANCHOR)) {
    if (objectAfterUsage(b, i) !== -1) return i;
  }
  return -1;
}

/** Index of the last `"usage"` followed by an object that starts at or before `lastStart`, or -1. */
function prevUsageObject(b: Uint8Array, lastStart: number): number {
  for (let i = lastIndexOfBytes(b, USAGE, lastStart, USAGE_ANCHOR); i !== -1; i = lastIndexOfBytes(b, USAGE, i - 1, USAGE_ANCHOR)) {
    if (objectAfterUsage(b, i) !== -1) return i;
  }
  return -1;
}

/** True when b[i] is the last byte of an event's blank line (\n\n, \r\n\r\n, \n\r\n, \r\n\n). */
const endsEvent = (b: Uint8Array, i: number) => b[i] === 10 && (b[i - 1] === 10 || (b[i - 1] === 13 && b[i - 2] === 10));

/**
 * Start of the event that holds b[at]. Nearly always the start of at's own line (a `data:`
 * line is the event's first): found by the native search for the line feed before it, not a
 * walk back byte by byte, which serves the rest.
 */
function eventStart(b: Uint8Array, at: number): number {
  const line = b.lastIndexOf(10, at) + 1;
  if (line === 0 || endsEvent(b, line - 1)) return line;
  let start = line - 1;
  while (start > 0 && !endsEvent(b, start - 1)) start--;
  return start;
}

/** Just past the blank line that ends the event holding b[at] (or the block's end). */
function eventEnd(b: Uint8Array, at: number): number {
  let end = at;
  for (let lf = b.indexOf(10, at); lf !== -1; lf = b.indexOf(10, lf + 1)) {
    if (endsEvent(b, lf)) return lf + 1;
    end = lf;
  }
  while (end < b.length && !endsEvent(b, end)) end++;
  return Math.min(b.length, end + 1);
}

/** End of the last complete event (just past its blank line), or 0. */
function lastBoundary(b: Uint8Array): number {
  for (let i = b.length - 1; i > 0; i--) if (endsEvent(b, i)) return i + 1;
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
 * usage citygate added, else null (pass the bytes on unchanged). Only the events that hold a
 * usage object are decoded and parsed; the others are left as bytes.
 */
function takeUsage(block: Uint8Array, strip: boolean, found: (u: ChatUsage) => void): Uint8Array | null {
  if (!strip) {
    lastUsage(block, found);
    return null;
  }
  let at = nextUsageObject(block);
  if (at === -1) return null;
  const parts: Uint8Array[] = [];
  let copied = 0; // block[0, copied) is in parts already (when something changed)
  let changed = false;
  while (at !== -1) {
    const start = eventStart(block, at);
    const end = eventEnd(block, at);
    let replaced = usageInPlace(block, start, end, strip, found);
    if (replaced === undefined) replaced = usageOf(dec.decode(block.subarray(start, end)), strip, found);
    if (replaced !== null) {
      changed = true;
      if (start > copied) parts.push(block.subarray(copied, start));
      if (replaced !== '') parts.push(enc.encode(replaced));
      copied = end;
    }
    at = nextUsageObject(block, end);
  }
  if (!changed) return null;
  if (copied < block.length) parts.push(block.subarray(copied));
  let size = 0;
  for (const p of parts) size += p.length;
  const out = new Uint8Array(size);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/**
 * Without strip nothing in the block changes, and a later usage replaces an earlier one, so only
 * the last usage object that reads counts: it is looked for from the block's end. The usage event
 * is the stream's last, and with include_usage every event before it has a `"usage":null` that a
 * search from the start passes over.
 */
function lastUsage(block: Uint8Array, found: (u: ChatUsage) => void): void {
  let got = false;
  const take = (u: ChatUsage) => {
    got = true;
    found(u);
  };
  for (let at = prevUsageObject(block, block.length - USAGE.length); at !== -1; at = prevUsageObject(block, at - 1)) {
    const start = eventStart(block, at);
    const end = eventEnd(block, at);
    if (lastMemberUsage(block, start, at, end, take) === undefined && usageInPlace(block, start, end, false, take) === undefined) {
      usageOf(dec.decode(block.subarray(start, end)), false, take);
    }
    if (got) return;
  }
}

const USAGE_KEY = enc.encode('usage');
const CHOICES_KEY = enc.encode('choices');
const NO_KEY = 0;
const USAGE_MEMBER = 1;
const CHOICES_MEMBER = 2;

/** Which of the members we look for the key b(from, to) names. */
function memberOf(b: Uint8Array, from: number, to: number): number {
  const key = to - from === USAGE_KEY.length ? USAGE_KEY : to - from === CHOICES_KEY.length ? CHOICES_KEY : null;
  if (!key) return NO_KEY;
  for (let i = 0; i < key.length; i++) if (b[from + i] !== key[i]) return NO_KEY;
  return key === USAGE_KEY ? USAGE_MEMBER : CHOICES_MEMBER;
}

const isSpace = (c: number) => c === 32 || c === 9 || c === 13 || c === 10;

/**
 * The usage event as OpenAI writes it, when nothing is to be removed: an event of one `data:`
 * line (b[start, end)), a JSON object that ends with its `usage` member (at `at`). The usage
 * object then runs from the '{' after `"usage"` to just before the line's last '}', and if those
 * bytes parse as one object it is the top-level member: had `"usage"` been nested, or followed by
 * another member, they would not be one JSON value. Parses only those bytes, without a walk over
 * the event's; answers null when it found the usage, undefined to leave the event to usageInPlace.
 */
function lastMemberUsage(b: Uint8Array, start: number, at: number, end: number, found: (u: ChatUsage) => void): null | undefined {
  if (!startsWithData(b, start)) return undefined;
  let lf = b.indexOf(10, start);
  if (lf === -1) lf = end; // the stream's last event, without its blank line
  else if (lf < at) return undefined; // "usage" is on a later line
  else if (lf + 1 < end && !(b[lf + 1] === 10 || (b[lf + 1] === 13 && b[lf + 2] === 10))) return undefined; // more lines follow
  let last = lf - 1;
  while (last > at && isSpace(b[last])) last--;
  if (b[last] !== 125 /* } */) return undefined;
  const open = objectAfterUsage(b, at);
  if (open === -1 || open >= last) return undefined;
  let usage: unknown;
  try {
    usage = JSON.parse(dec.decode(b.subarray(open, last)));
  } catch {
    return undefined;
  }
  if (!usage || typeof usage !== 'object' || Array.isArray(usage)) return undefined;
  found(usage as ChatUsage);
  return null;
}

/**
 * usageOf for the common event, read from its bytes: an event that starts with its `data:`
 * line, a JSON object on that one line. Finds the object's top-level members `usage` and
 * `choices` by a scan of the bytes (strings skipped) and parses the usage object alone, instead
 * of decoding and parsing the whole event. Answers as usageOf would, or undefined when the
 * event is not of that shape or must be rewritten (usageOf then reads it).
 */
function usageInPlace(b: Uint8Array, start: number, end: number, strip: boolean, found: (u: ChatUsage) => void): string | null | undefined {
  if (!startsWithData(b, start)) return undefined;
  let i = b[start + 5] === 32 ? start + 6 : start + 5; // the '{'
  // Plain locals, no closure over them: this loop is the stream's hottest.
  let depth = 0;
  let member = NO_KEY;
  let expectKey = false;
  let valueAt = -1; // a top-level member's value is b[valueAt, the ',' or '}' that ends it)
  let usageAt = -1;
  let usageEnd = -1;
  let choicesAt = -1;
  let choicesEnd = -1;
  for (; i < end; i++) {
    const c = b[i];
    if (c === 34 /* " */) {
      const from = i + 1;
      for (i++; i < end && b[i] !== 34; i++) if (b[i] === 92 /* \ */) i++;
      if (i >= end) return undefined;
      if (depth === 1 && expectKey) {
        member = memberOf(b, from, i);
        expectKey = false;
      }
    } else if (c === 123 || c === 91) {
      depth++;
      if (depth === 1) expectKey = true;
    } else if (c === 125 || c === 93 || (c === 44 /* , */ && depth === 1)) {
      if (depth === 1) {
        if (member === USAGE_MEMBER) {
          usageAt = valueAt;
          usageEnd = i;
        } else if (member === CHOICES_MEMBER) {
          choicesAt = valueAt;
          choicesEnd = i;
        }
        member = NO_KEY;
        if (c !== 44) break;
        expectKey = true;
      } else depth--;
    } else if (c === 10) return undefined; // the object goes on past its line
    else if (depth === 1 && c === 58 /* : */) valueAt = i + 1;
  }
  if (i >= end || usageAt === -1) return undefined;
  if (strip && !(choicesAt !== -1 && isEmptyArray(b, choicesAt, choicesEnd))) return undefined; // rewritten without its usage: usageOf
  let usage: unknown;
  try {
    usage = JSON.parse(dec.decode(b.subarray(usageAt, usageEnd)));
  } catch {
    return undefined;
  }
  if (!usage || typeof usage !== 'object') return undefined;
  found(usage as ChatUsage);
  return strip ? '' : null; // dropped: the extra usage event
}

/** b[from, to) is `[]`, with any blanks around and inside. */
function isEmptyArray(b: Uint8Array, from: number, to: number): boolean {
  while (from < to && isSpace(b[from])) from++;
  let last = to - 1;
  while (last > from && isSpace(b[last])) last--;
  return b[from] === 91 /* [ */ && b[last] === 93 /* ] */ && isBlank(b, from + 1, last);
}

function isBlank(b: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (!isSpace(b[i])) return false;
  return true;
}

/** Reads the usage of one event; when `strip`, returns what replaces the event ('' = drop it), else null (unchanged). */
function usageOf(ev: string, strip: boolean, found: (u: ChatUsage) => void): string | null {
  const m = /^data:\s?(.*)$/m.exec(ev);
  if (!m) return null;
  let obj: any;
  try {
    obj = JSON.parse(m[1]);
  } catch {
    return null;
  }
  if (!obj || typeof obj !== 'object' || !obj.usage || typeof obj.usage !== 'object') return null;
  found(obj.usage as ChatUsage);
  if (!strip) return null;
  if (Array.isArray(obj.choices) && obj.choices.length === 0) return ''; // the extra usage event
  delete obj.usage;
  return `data: ${JSON.stringify(obj)}\n\n`;
}

const EMPTY = new Uint8Array(0);
const DONE: IteratorResult<Uint8Array> = { done: true, value: undefined };

/**
 * The relayed chunks, as an async iterable (the Node runtime writes them as they come; a web
 * stream is made over them for Workers, kernel/http.ts). Every next() answers a non-empty chunk
 * or the end; an upstream that breaks gives what was pending and an error event, then the end.
 * return() is the client going away: the call ends as aborted and the upstream is let go.
 */
export function relaySse(
  src: AsyncIterable<Uint8Array>,
  opts: { strip: boolean; onEnd(r: RelayEnd): void; errorEvent(e: unknown): string },
): AsyncIterable<Uint8Array> {
  const it = src[Symbol.asyncIterator]();
  let pending: Uint8Array = EMPTY;
  let usage: ChatUsage | null = null;
  let events = 0;
  let ended = false;
  let closed = false; // ended or returned: next() answers the end
  const end = (r: Omit<RelayEnd, 'usage' | 'events'>) => {
    if (ended) return;
    ended = true;
    opts.onEnd({ usage, events, ...r });
  };
  const found = (u: ChatUsage) => void (usage = u);

  async function next(): Promise<IteratorResult<Uint8Array>> {
    for (;;) {
      if (closed) return DONE;
      let r: IteratorResult<Uint8Array>;
      try {
        r = await it.next();
      } catch (e) {
        if (closed) return DONE;
        closed = true;
        // Without strip, the unfinished event went out already with its chunk.
        const rest = opts.strip ? pending : EMPTY;
        pending = EMPTY;
        const error = enc.encode(opts.errorEvent(e));
        end({ aborted: false, error: e });
        return { done: false, value: concat(rest, error) };
      }
      if (closed) return DONE;
      if (r.done) {
        closed = true;
        const rest = pending;
        pending = EMPTY;
        let last: Uint8Array = EMPTY;
        if (rest.length) {
          // An event without its blank line at the very end; without strip, it went out already.
          const changed = takeUsage(rest, opts.strip, found);
          if (usage === null) events += countDataLines(rest);
          if (opts.strip) last = changed ?? rest;
        }
        end({ aborted: false });
        return last.length ? { done: false, value: last } : DONE;
      }
      const chunk = r.value;
      const all = concat(pending, chunk);
      const b = lastBoundary(all);
      pending = b === all.length ? EMPTY : all.slice(b);
      if (!opts.strip) {
        // Pass the chunk on at once; keep only the unfinished event to scan it whole later.
        if (b > 0) {
          const done = all.subarray(0, b);
          takeUsage(done, false, found);
          if (usage === null) events += countDataLines(done);
        }
        if (chunk.length === 0) continue;
        return { done: false, value: chunk };
      }
      if (b === 0) continue; // nothing complete yet
      const done = all.subarray(0, b);
      const out = takeUsage(done, true, found) ?? done;
      if (usage === null) events += countDataLines(done);
      if (out.length === 0) continue;
      return { done: false, value: out };
    }
  }

  const iterator: AsyncIterator<Uint8Array> = {
    next,
    async return() {
      closed = true;
      end({ aborted: true });
      await it.return?.();
      return DONE;
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}
