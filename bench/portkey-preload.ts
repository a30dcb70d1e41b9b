// Preloaded into the Portkey child process (node --import) to work around a Portkey bug, so
// that its streaming path can be measured at all.
//
// @portkey-ai/gateway 1.15.2 on Node wraps an upstream SSE response as
// `new Response(stream, upstreamResponse)` and then appends x-portkey-* headers to it. Its
// bundled @hono/node-server (1.19) replaces the global Response with a lightweight class
// that keeps `init.headers` by reference, i.e. the upstream fetch response's immutable
// Headers, so every streamed chat completion fails with "TypeError: immutable" and Portkey
// answers 500 "Something went wrong". This shim gives streamed upstream responses a fresh,
// mutable Headers object; JSON responses are returned untouched.
const UpstreamResponse = globalThis.Response;
const upstreamFetch = globalThis.fetch;

globalThis.fetch = async function fetchWithMutableSseHeaders(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
  const res = await upstreamFetch(input, init);
  if (!res.headers.get("content-type")?.startsWith("text/event-stream")) return res;
  return new UpstreamResponse(res.body, { status: res.status, statusText: res.statusText, headers: new Headers(res.headers) });
};
