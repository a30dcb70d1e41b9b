// How URLs in a caller's messages (image and file parts) reach a translated upstream: the AI
// SDK never downloads them itself. Every generateText/streamText gets this `experimental_download`:
// a URL the provider fetches itself (its model's `supportedUrls`) is left to the provider; any
// other is fetched under the outbound policy (kernel/outbound/policy.ts) and its bytes handed to
// the provider. A URL that cannot be read is the caller's 400 `input_unreadable` (413
// `input_too_large`), thrown as a GatewayError so routing neither retries it nor counts it
// against the upstream. Fetched once per request: a retry on another upstream reuses the bytes.
import type { GatewayContext } from '../../../kernel/context.ts';
import { GatewayError } from '../../../kernel/errors.ts';
import { fetchUntrusted, UnreadableUrl, type FetchedBytes } from '../../../kernel/outbound/policy.ts';

interface DownloadRequest {
  url: URL;
  isUrlSupportedByModel: boolean;
  abortSignal?: AbortSignal;
}

/** The caller's 4xx for a URL the policy would not or could not read. */
export function unreadableError(e: UnreadableUrl, what: string, param?: string, code = 'input_unreadable', tooLargeCode = 'input_too_large'): GatewayError {
  if (e.reason === 'too_large') return new GatewayError(413, tooLargeCode, `${what} could not be read: ${e.message}.`, { param });
  return new GatewayError(400, code, `${what} could not be read: ${e.message}.`, { param });
}

/** An `experimental_download` for one request's AI SDK calls. */
export function guardedDownload(gw: GatewayContext) {
  const got = new Map<string, Promise<FetchedBytes>>();
  const one = (r: DownloadRequest): Promise<FetchedBytes | null> => {
    if (r.isUrlSupportedByModel) return Promise.resolve(null);
    const key = r.url.href;
    let p = got.get(key);
    if (!p) {
      p = fetchUntrusted(gw, r.url, { signal: r.abortSignal }).catch((e) => {
        got.delete(key);
        throw e instanceof UnreadableUrl ? unreadableError(e, `The URL ${shortUrl(r.url)}`) : e;
      });
      got.set(key, p);
    }
    return p;
  };
  return (requests: DownloadRequest[]) => Promise.all(requests.map(one));
}

const perCall = new WeakMap<object, ReturnType<typeof guardedDownload>>();

/** The download function of one call (`key`: the call's AiCall), the same for all its attempts. */
export function downloadFor(key: object, gw: GatewayContext): ReturnType<typeof guardedDownload> {
  let d = perCall.get(key);
  if (!d) perCall.set(key, (d = guardedDownload(gw)));
  return d;
}

/** A URL for an error message: scheme, host and path, without query or credentials. */
function shortUrl(u: URL): string {
  const s = `${u.protocol}//${u.host}${u.pathname}`;
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}
