// A captured call (kernel/request-log.ts) made into what is stored: the table row with its
// metadata, and for a full log the bodies, every secret redacted and each body capped.
// Runs in the background, after the response went out.
//
// Redaction: headers that carry credentials (Authorization, x-api-key, cookies, anything named
// like a key, token, secret or session) are replaced whole; every other header value, the URL,
// and every string in a JSON body go through the gateway's redactor (kernel/redact.ts: the
// secrets it holds, the caller's own credential, anything shaped like a key or token); JSON
// fields named like a credential (api_key, token, password …) are replaced whole.
import type { Selectable } from 'kysely';
import type { RequestLogsTable } from '../../../db/schema.ts';
import { newId } from '../../../kernel/crypto.ts';
import { REDACTED, secretRedactor } from '../../../kernel/redact.ts';
import type { CapturedCall } from '../../../kernel/request-log.ts';
import { assembleStream } from '../../../kernel/stream-assembly.ts';

/** Each body is kept up to this many bytes (UTF-8) of its redacted JSON or text. */
export const BODY_CAP_BYTES = 64 * 1024;
/** Bodies larger than this are not parsed: their first bytes are redacted as text. */
const PARSE_LIMIT = 4 * 1024 * 1024;
/** A string inside a JSON body that is a data URL or base64 this long is shown by its size only. */
const BLOB_STRING = 4096;

const SECRET_HEADER = /^(authorization|proxy-authorization|cookie|set-cookie)$|key|token|secret|auth|session|password|signature|credential/i;
const SECRET_FIELD = /^(authorization|(x-)?api[-_]?key|apikey|token|(access|refresh|id|user|bureau|session)[-_]?token|secret|client[-_]?secret|password|passwd|cookie|admin[-_]?key|credential|credentials)$/i;
const TEXTUAL = /json|text\/|event-stream|x-www-form-urlencoded|xml/i;

export type Row = Selectable<RequestLogsTable>;

export interface StoredBody {
  content_type: string | null;
  bytes: number;
  /** JSON (parsed), text, or null (none, or binary: see omitted). */
  body: unknown;
  truncated: boolean;
  /** Why there is no body: 'binary' (not text), or absent. */
  omitted?: string;
  /** A stream, kept as its assembled answer. */
  assembled?: boolean;
}

export interface Built {
  row: Row;
  /** The bodies (full mode): the blob's JSON. */
  bodies: { request: StoredBody; response: StoredBody } | null;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

type Redact = (s: string) => string;

function redactJson(v: unknown, redact: Redact): unknown {
  if (typeof v === 'string') {
    if (v.length >= BLOB_STRING && (/^data:[^,]{0,100},/.test(v) || /^[A-Za-z0-9+/=_-]+$/.test(v.slice(0, BLOB_STRING)))) {
      return `${redact(v.slice(0, 64))}… [${v.length} characters omitted]`;
    }
    return redact(v);
  }
  if (Array.isArray(v)) return v.map((x) => redactJson(x, redact));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = SECRET_FIELD.test(k) && x != null && typeof x !== 'object' ? REDACTED : redactJson(x, redact);
    return out;
  }
  return v;
}

/** At most `cap` bytes of `text`, cut at a character boundary. */
function cut(text: string, cap: number): { text: string; truncated: boolean } {
  if (text.length * 3 <= cap) return { text, truncated: false };
  const bytes = enc.encode(text);
  if (bytes.byteLength <= cap) return { text, truncated: false };
  return { text: dec.decode(bytes.subarray(0, cap)).replace(/\uFFFD$/, ''), truncated: true };
}

/** A redacted, capped body from its bytes (or an object answered as JSON). */
function body(raw: { bytes?: Uint8Array; json?: unknown; assembled?: unknown }, contentType: string | null, size: number, redact: Redact, isAssembled = false): StoredBody {
  const base = { content_type: contentType, bytes: size, truncated: false } as StoredBody;
  if (isAssembled) base.assembled = true;
  let value: unknown;
  if ('json' in raw || 'assembled' in raw) value = 'json' in raw ? raw.json : raw.assembled;
  else if (raw.bytes) {
    if (contentType && !TEXTUAL.test(contentType)) return { ...base, body: null, omitted: 'binary' };
    if (raw.bytes.byteLength > PARSE_LIMIT) {
      // too large to parse: its first bytes as text (a secret cut at their end is dropped with it)
      const head = redact(dec.decode(raw.bytes.subarray(0, BODY_CAP_BYTES * 2)));
      return { ...base, body: cut(head, BODY_CAP_BYTES - 1024).text, truncated: true };
    }
    const text = dec.decode(raw.bytes);
    try {
      value = text ? JSON.parse(text) : null;
    } catch {
      const c = cut(redact(text), BODY_CAP_BYTES);
      return { ...base, body: c.text, truncated: c.truncated };
    }
  } else return { ...base, body: null };
  if (typeof value === 'string') {
    const c = cut(redact(value), BODY_CAP_BYTES);
    return { ...base, body: c.text, truncated: c.truncated };
  }
  const clean = redactJson(value, redact);
  const json = JSON.stringify(clean) ?? 'null';
  if (enc.encode(json).byteLength <= BODY_CAP_BYTES) return { ...base, body: clean };
  // over the cap: kept as the first bytes of its JSON text
  return { ...base, body: cut(json, BODY_CAP_BYTES).text, truncated: true };
}

function headers(list: [string, string][], redact: Redact): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of list) out[k] = SECRET_HEADER.test(k) ? REDACTED : redact(v);
  return out;
}

const safeDecode = (s: string) => {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
};

/** The URL's path and query, the values of query parameters named like a credential replaced whole. */
function pathOf(url: string, redact: Redact): string {
  const i = url.indexOf('/', url.indexOf('//') + 2);
  const p = i < 0 ? '/' : url.slice(i);
  const q = p.indexOf('?');
  if (q < 0) return redact(p);
  const query = p
    .slice(q + 1)
    .split('&')
    .map((kv) => {
      const eq = kv.indexOf('=');
      return eq > 0 && SECRET_HEADER.test(safeDecode(kv.slice(0, eq))) ? `${kv.slice(0, eq)}=${REDACTED}` : kv;
    })
    .join('&');
  return redact(`${p.slice(0, q)}?${query}`);
}

/** The model a call asked for, from the first bytes of its JSON body. */
function modelOf(call: CapturedCall, redact: Redact): string | null {
  const b = call.request.body;
  if (!b) return null;
  const m = /"model"\s*:\s*"([^"\\]{1,200})"/.exec(dec.decode(b.subarray(0, 8192)));
  return m ? redact(m[1]) : null;
}

export function build(call: CapturedCall, storeBodies: boolean): Built {
  const redact = secretRedactor([call.credential]);
  const id = call.identity;
  const req = call.request;
  const res = call.response;
  // a stream (full mode): its answer, assembled now, after the response
  const assembled = res.body && 'chunks' in res.body ? assembleStream(res.body.chunks, res.body.sse, call.assemble?.() ?? null) : null;
  if (res.body && 'json' in res.body && !res.bytes) res.bytes = enc.encode(JSON.stringify(res.body.json) ?? '').byteLength; // answered by the kernel: no length on the way
  const reqType = req.headers.find(([k]) => k === 'content-type')?.[1] ?? null;
  const resType = res.headers.find(([k]) => k === 'content-type')?.[1] ?? null;
  const meta = {
    method: call.method,
    path: pathOf(call.url, redact),
    request: { headers: headers(req.headers, redact), content_type: reqType, bytes: req.bytes },
    response: { status: res.status, headers: headers(res.headers, redact), content_type: resType, bytes: res.bytes, stream: res.stream, ...(assembled?.events !== undefined ? { events: assembled.events } : {}), ended: res.ended },
    timings: { received_at: new Date(call.receivedAt).toISOString(), head_ms: res.headMs, end_ms: res.endMs },
    ...(call.error ? { error: { code: call.error.code, message: redact(call.error.message) } } : {}),
  };
  let bodies: Built['bodies'] = null;
  if (storeBodies) {
    const request = body(req.body ? { bytes: req.body } : {}, reqType, req.bytes, redact);
    const rb = res.body;
    let response: StoredBody;
    if (!rb) response = { content_type: resType, bytes: res.bytes, body: null, truncated: false, ...(resType && !TEXTUAL.test(resType) ? { omitted: 'binary' } : {}) };
    else if ('chunks' in rb) {
      response = body({ assembled: assembled!.assembled }, resType, res.bytes, redact, true);
      response.truncated ||= rb.truncated || assembled!.truncated;
    } else response = body(rb, resType, res.bytes, redact);
    bodies = { request, response };
  }
  const row: Row = {
    log_id: newId('rlog', 12),
    request_id: call.requestId,
    city_id: id.kind === 'user' || id.kind === 'bureau' ? id.cityId : null,
    user_id: id.kind === 'user' ? id.userId : null,
    identity: id.kind,
    mode: bodies ? 'full' : 'metadata',
    route: call.route,
    model: modelOf(call, redact),
    status: res.status,
    meta: JSON.stringify(meta),
    blob_key: null,
    request_bytes: req.bytes,
    response_bytes: res.bytes,
    truncated: bodies && (bodies.request.truncated || bodies.response.truncated) ? 1 : 0,
    created_at: Math.round(call.receivedAt),
  };
  return { row, bodies };
}
