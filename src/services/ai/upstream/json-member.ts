// One top-level member of a JSON answer, read from its bytes without parsing the rest: the
// chat pass-through needs only `usage`, which OpenAI puts near the end, so the scan runs from
// the end backwards and costs the bytes after the member, not the whole answer (which can be
// large). Strings are skipped by their quotes: in valid JSON a quote inside a string is always
// escaped, i.e. preceded by an odd number of backslashes.

const QUOTE = 34;
const BACKSLASH = 92;
const isSpace = (c: number) => c === 32 || c === 9 || c === 13 || c === 10;

/** The index of the first byte at or after `i` that is not JSON whitespace. */
function skipSpace(b: Uint8Array, i: number): number {
  while (i < b.length && isSpace(b[i])) i++;
  return i;
}

/** Index of the quote that opens the string whose closing quote is at `close`, or -1. */
function stringStart(b: Uint8Array, close: number): number {
  // (lastIndexOf counts a negative start from the end: never pass one)
  for (let j = close > 0 ? b.lastIndexOf(QUOTE, close - 1) : -1; j !== -1; j = j > 0 ? b.lastIndexOf(QUOTE, j - 1) : -1) {
    let k = j - 1;
    while (k >= 0 && b[k] === BACKSLASH) k--;
    if ((j - 1 - k) % 2 === 0) return j;
  }
  return -1;
}

/** True when b[from, to) is the bytes of `key` (ASCII, no escapes). */
function isKey(b: Uint8Array, from: number, to: number, key: string): boolean {
  if (to - from !== key.length) return false;
  for (let i = 0; i < key.length; i++) if (b[from + i] !== key.charCodeAt(i)) return false;
  return true;
}

/**
 * The bytes of the object value of the top-level member `key` (an ASCII name) of the JSON
 * object `b` — the last such member, as JSON.parse keeps the last of duplicate keys — or null
 * when the answer is not an object, has no such member, or its value is not an object. Does
 * not validate the rest of the answer.
 */
export function topLevelObjectMember(b: Uint8Array, key: string): Uint8Array | null {
  const start = skipSpace(b, 0);
  let i = b.length - 1;
  while (i > start && isSpace(b[i])) i--;
  if (b[start] !== 123 /* { */ || b[i] !== 125 /* } */ || i === start) return null;
  let depth = 1; // inside the top-level object
  let valueEnd = -1; // the closing brace of a depth-1 member's object value
  for (i--; i > start; i--) {
    const c = b[i];
    if (c === QUOTE) {
      const open = stringStart(b, i);
      if (open <= start) return null;
      if (depth === 1) {
        // A string at depth 1 is a key or a value; a key is followed by ':'.
        let k = skipSpace(b, i + 1);
        if (b[k] === 58 /* : */ && isKey(b, open + 1, i, key)) {
          k = skipSpace(b, k + 1);
          if (b[k] !== 123 || valueEnd === -1) return null; // its value is not an object
          return b.subarray(k, valueEnd + 1);
        }
      }
      i = open;
    } else if (c === 125 || c === 93) {
      if (depth === 1) valueEnd = c === 125 ? i : -1;
      depth++;
    } else if (c === 123 || c === 91) {
      depth--;
      if (depth === 0) return null; // unbalanced
    } else if (depth === 1 && c === 44 /* , */) {
      valueEnd = -1;
    }
  }
  return null;
}

/** The usage numbers a chat call is charged by (chat/passthrough.ts's usageToMeasured). */
export interface ChatUsageNumbers {
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  /** prompt_tokens_details.cache_write_tokens (OpenRouter and others in front of Anthropic). */
  cache_write_tokens: number;
}

/**
 * An OpenAI usage object's prompt_tokens, completion_tokens and prompt_tokens_details.
 * cached_tokens read from its bytes (as topLevelObjectMember returns them), as usageToMeasured
 * would read them from the parsed object — or null when the object has anything this reader does
 * not take (an escape in a key, a number that is not a plain integer, a malformed object):
 * the caller parses it then. Saves decoding and parsing the object (and its nested ones).
 */
export function chatUsageNumbers(b: Uint8Array): ChatUsageNumbers | null {
  const r = { input_tokens: 0, output_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 };
  return readObject(b, 0, r, 1) === b.length ? r : null;
}

const PROMPT = 1;
const COMPLETION = 2;
const DETAILS = 3;
const CACHED = 4;
const WRITTEN = 5;

/** Which counted member the key b[from, to) names at this level (1: usage, 2: its details). */
function counted(b: Uint8Array, from: number, to: number, level: number): number {
  if (level === 1) {
    if (isKey(b, from, to, 'prompt_tokens')) return PROMPT;
    if (isKey(b, from, to, 'completion_tokens')) return COMPLETION;
    if (isKey(b, from, to, 'prompt_tokens_details')) return DETAILS;
  } else if (level === 2) {
    if (isKey(b, from, to, 'cached_tokens')) return CACHED;
    if (isKey(b, from, to, 'cache_write_tokens')) return WRITTEN;
  }
  return 0;
}

/** Reads the object at b[i] ('{'), filling `r` at levels 1 and 2; the index past it, or -1. */
function readObject(b: Uint8Array, i: number, r: ChatUsageNumbers, level: number): number {
  if (b[i] !== 123) return -1;
  i = skipSpace(b, i + 1);
  if (b[i] === 125) return i + 1;
  for (;;) {
    if (b[i] !== QUOTE) return -1;
    const from = i + 1;
    let j = from;
    while (j < b.length && b[j] !== QUOTE) {
      if (b[j] === BACKSLASH) return -1; // an escaped key: JSON.parse decides
      j++;
    }
    if (j >= b.length) return -1;
    const which = counted(b, from, j, level);
    i = skipSpace(b, j + 1);
    if (b[i] !== 58 /* : */) return -1;
    i = skipSpace(b, i + 1);
    if (which === PROMPT || which === COMPLETION || which === CACHED || which === WRITTEN) {
      let v = 0;
      let k = i;
      while (k < b.length && b[k] >= 48 && b[k] <= 57) v = v * 10 + (b[k++] - 48);
      if (k === i) {
        // not a plain integer: null counts as nothing (as usageToMeasured has it), anything else → JSON.parse
        if (!isKey(b, i, i + 4, 'null')) return -1;
        k = i + 4;
        v = 0;
      } else if (k - i > 15 || b[k] === 46 /* . */ || b[k] === 101 || b[k] === 69 /* e E */ || (b[i] === 48 && k - i > 1)) return -1;
      if (which === PROMPT) r.input_tokens = v;
      else if (which === COMPLETION) r.output_tokens = v;
      else if (which === CACHED) r.cached_tokens = v;
      else r.cache_write_tokens = v;
      i = k;
    } else if (which === DETAILS) {
      r.cached_tokens = 0; // a later prompt_tokens_details replaces an earlier one, as in JSON.parse
      r.cache_write_tokens = 0;
      if (b[i] === 123) i = readObject(b, i, r, 2);
      else i = skipValue(b, i);
    } else {
      i = skipValue(b, i);
    }
    if (i === -1) return -1;
    i = skipSpace(b, i);
    if (b[i] === 125) return i + 1;
    if (b[i] !== 44 /* , */) return -1;
    i = skipSpace(b, i + 1);
  }
}

/** Bytes that may stand outside strings in JSON: structure, space, numbers, true/false/null. */
const BARE = new Uint8Array(256);
for (const c of '{}[]:, \t\r\n-+.0123456789eEtrufalsn') BARE[c.charCodeAt(0)] = 1;

/**
 * The index past the JSON value at b[i] (strings, objects and arrays skipped whole), or -1.
 * Not a full validation: only bytes that JSON allows outside strings are let through.
 */
function skipValue(b: Uint8Array, i: number): number {
  let depth = 0;
  const c0 = b[i];
  if (i >= b.length || c0 === 44 || c0 === 125 || c0 === 93 || c0 === 58) return -1; // no value
  for (; i < b.length; i++) {
    const c = b[i];
    if (!BARE[c] && c !== QUOTE) return -1;
    if (c === QUOTE) {
      for (i++; i < b.length && b[i] !== QUOTE; i++) if (b[i] === BACKSLASH) i++;
      if (i >= b.length) return -1;
      if (depth === 0) return i + 1;
    } else if (c === 123 || c === 91) depth++;
    else if (c === 125 || c === 93) {
      if (depth === 0) return i; // the end of the enclosing object: a scalar ended here
      if (--depth === 0) return i + 1;
    } else if (depth === 0 && (c === 44 || isSpace(c))) return i;
  }
  return -1;
}
