// Reading an action's input: the query string for GET, a size-limited JSON body for POST.
import type { z } from 'zod';
import { GatewayError, badRequest } from './errors.ts';

export function tooLarge(limit: number): GatewayError {
  return new GatewayError(413, 'body_too_large', `The request body is larger than ${limit} bytes.`);
}

/** A runtime's own reader of a request's body (GatewayOptions.readBody): past `limit` bytes, it throws tooLarge(limit). */
export type DirectBodyReader = (platform: unknown, limit: number) => Promise<Uint8Array> | null;

/**
 * Reads the body, refusing it past `limit` bytes without buffering the excess: with the
 * runtime's own reader when it has one for this request (`platform`: what it handed the
 * gateway with it), else through the Request.
 */
export async function readBody(req: Request, limit: number, direct?: DirectBodyReader, platform?: unknown): Promise<Uint8Array> {
  const declared = Number(req.headers.get('content-length') ?? NaN);
  if (declared > limit) throw tooLarge(limit);
  const own = direct?.(platform, limit);
  if (own) return own;
  if (declared >= 0) {
    // A declared length within the limit: read it whole (runtimes have a fast path for this).
    const buf = new Uint8Array(await req.arrayBuffer());
    if (buf.byteLength > limit) throw tooLarge(limit);
    return buf;
  }
  if (!req.body) return new Uint8Array();
  return readStreamCapped(req.body, limit, () => tooLarge(limit));
}

/**
 * Reads a stream whole, but never more than `limit` bytes: past it the stream is cancelled and
 * `tooLarge()` is thrown (a request body here; a fetched URL in kernel/outbound/policy.ts).
 */
export async function readStreamCapped(stream: ReadableStream<Uint8Array>, limit: number, tooLarge: () => Error): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

const decoder = new TextDecoder();

export function parseJsonBody(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) return {};
  const text = decoder.decode(bytes);
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest('invalid_json', `The request body is not valid JSON: ${(e as Error).message}`);
  }
}

/** Query parameters as an object; a repeated parameter becomes an array. */
export function parseQuery(url: URL): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of url.searchParams) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/** Validates input against the action's schema; the first issue becomes a 400 naming its field. */
export function validate<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  // A field the schema does not know (strict objects) is named as the param too.
  const unknown = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]] : issue.path;
  const param = unknown.map(String).join('.');
  const message = param ? `${param}: ${issue.message}` : issue.message;
  throw badRequest('invalid_input', message, param || undefined);
}
