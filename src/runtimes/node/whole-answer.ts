// Whole answers of bytes already in memory (kernel/http.ts wholeResponse: a relayed JSON answer),
// written by the runtime itself: head and body in one writeHead(status, object) and end, which
// is Node's fast path (no setHeader per header, no merge of two header sets by writeHead).
import type { ServerResponse } from 'node:http';
import { alreadySentResponse } from './event-stream.ts';

/** `added`: the headers the gateway added; the Response's own win on a clash. */
export function writeWhole(res: Response, whole: { bytes: Uint8Array; headers: Record<string, string> }, out: ServerResponse, added?: Record<string, string>): Response {
  const headers: Record<string, string> = added ? { ...added, ...whole.headers } : { ...whole.headers };
  headers['content-length'] = String(whole.bytes.byteLength);
  out.writeHead(res.status, headers).end(whole.bytes);
  return alreadySentResponse();
}
