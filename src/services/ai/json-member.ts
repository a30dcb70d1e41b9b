// One top-level member of a JSON answer, read from its bytes without parsing the rest: the
// chat pass-through needs only `usage`, which OpenAI puts near the end, so the scan runs from
// the end backwards and costs the bytes after the member, not the whole answer (which can be
// large). Strings are skipped by their quotes: in valid JSON a quote inside a string is always
// escaped, i.e. preceded by an odd number of backslashes.

const QUOTE = 34;
const BACKSLASH = 92;
const isSpace = (c: number) => c === 32 || c === 9 || c === 13 || c === 10;

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
  let start = 0;
  while (start < b.length && isSpace(b[start])) start++;
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
        let k = i + 1;
        while (isSpace(b[k])) k++;
        if (b[k] === 58 /* : */ && isKey(b, open + 1, i, key)) {
          k++;
          while (isSpace(b[k])) k++;
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
