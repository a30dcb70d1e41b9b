// The framework-free relay: node:http and undici, nothing else. Method, headers and body are
// piped through to the upstream and its answer piped back; nothing is parsed, validated,
// metered or logged. It is what any Node gateway must spend on a call at the least, so
// citygate's CPU per call is judged as a multiple of this one's (bench/guard.ts, cpu.ts).
// Env: PORT, UPSTREAM (the stub's origin), UPSTREAM_KEY.
import { createServer } from "node:http";
import { Agent, request } from "undici";

const upstream = new URL(process.env.UPSTREAM!);
const base = upstream.pathname.replace(/\/$/, "");
const auth = `Bearer ${process.env.UPSTREAM_KEY}`;
const agent = new Agent({ connections: 256, keepAliveTimeout: 30_000 });
// Hop-by-hop headers (RFC 9110 §7.6.1) and the ones the relay sets itself are not passed on.
const DROP = new Set(["host", "connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection", "authorization"]);

const server = createServer((req, res) => {
  if (req.url === "/") return void res.end("ok");
  const headers: Record<string, string | string[]> = { authorization: auth };
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !DROP.has(k)) headers[k] = v;
  // The body's bytes as they came (Node's stream into undici as a stream costs a chunked
  // upload and twice the CPU of handing it the bytes; nothing is parsed either way).
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => relay(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
  const relay = (body: Buffer) => request(`${upstream.origin}${base}${req.url!.replace(/^\/v1/, "")}`, { method: req.method as "POST", headers, body, dispatcher: agent }).then(
    (up) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !DROP.has(k)) out[k] = v;
      if (res.destroyed) return void up.body.on("error", () => {}).destroy(); // the client went away (a load window ended)
      res.writeHead(up.statusCode, out);
      // A stream is piped as it comes; a whole answer is written in one end() (Node's fast path).
      if (String(up.headers["content-type"]).startsWith("text/event-stream")) {
        up.body.on("data", (c: Buffer) => res.write(c)).on("end", () => res.end()).on("error", () => res.destroy());
        res.on("close", () => up.body.destroy());
      }
      else up.body.bytes().then((b) => res.end(b), () => res.destroy());
    },
    () => {
      if (!res.destroyed && !res.headersSent) res.writeHead(502).end();
    },
  );
});
server.listen(Number(process.env.PORT), "127.0.0.1");
