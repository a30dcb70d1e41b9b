// The one export of the Workers runtime module this runtime uses (typed here so the shared
// TypeScript setup needs no ambient Workers typings).
declare module 'cloudflare:workers' {
  /** Keeps `promise` alive after the response, on the request (or queue batch) whose code calls it. */
  export function waitUntil(promise: Promise<unknown>): void;
}
