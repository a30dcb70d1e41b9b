// The floor of a Node gateway: Hono on @hono/node-server relaying POST /v1/chat/completions to
// the upstream with undici (the same stack citygate uses), and nothing else — no auth, no
// metering, no logs. What is left between this and citygate is citygate's own work per call.
// Env: PORT, UPSTREAM (the stub's origin), UPSTREAM_KEY.
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { Agent, request } from "undici";

const upstream = `${process.env.UPSTREAM}/chat/completions`;
const auth = `Bearer ${process.env.UPSTREAM_KEY}`;
const agent = new Agent({ connections: 256, keepAliveTimeout: 30_000 });
const app = new Hono();
app.get("/", (c) => c.text("ok"));
app.post("/v1/chat/completions", async (c) => {
  const body = new Uint8Array(await c.req.arrayBuffer());
  const res = await request(upstream, { method: "POST", headers: { "content-type": "application/json", authorization: auth }, body, dispatcher: agent });
  const type = res.headers["content-type"];
  if (typeof type === "string" && type.startsWith("text/event-stream")) {
    return new Response(res.body as unknown as ReadableStream, { status: res.statusCode, headers: { "content-type": type, "cache-control": "no-cache" } });
  }
  return new Response((await res.body.bytes()) as Uint8Array<ArrayBuffer>, { status: res.statusCode, headers: { "content-type": String(type ?? "application/json") } });
});
serve({ fetch: app.fetch, hostname: "127.0.0.1", port: Number(process.env.PORT) });
