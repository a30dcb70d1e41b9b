// A tiny node:http harness shared by the provider stubs: one handler, every request
// recorded, bound to 127.0.0.1 on an ephemeral port, closed without waiting for
// keep-alive sockets. Deterministic helpers for ids live here too.
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type RecordedRequest = {
  method: string;
  /** pathname only, e.g. "/login/oauth/access_token" */
  path: string;
  /** pathname + search, exactly as received */
  url: string;
  query: Record<string, string>;
  /** header names lower-cased; repeated headers joined with ", " */
  headers: Record<string, string>;
  /** raw body as text ("" when none) */
  body: string;
  at: number;
};

export type StubResponse = {
  status: number;
  headers?: Record<string, string>;
  /** objects are sent as JSON (content-type application/json unless given) */
  body?: string | object;
};

export type Handler = (req: RecordedRequest) => StubResponse | Promise<StubResponse>;

export type HttpStub = {
  origin: string;
  port: number;
  requests: RecordedRequest[];
  close(): Promise<void>;
};

/** A stub's request body: the raw text, parsed as JSON when it is (badJson: it is not). */
export async function readJsonBody(req: IncomingMessage): Promise<{ raw: string; body: any; badJson: boolean }> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks).toString("utf8");
  try {
    return { raw, body: raw ? JSON.parse(raw) : undefined, badJson: false };
  } catch {
    return { raw, body: raw, badJson: true };
  }
}

export async function startHttpStub(handler: Handler): Promise<HttpStub> {
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    void serve(req, res);
  });

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? "/", "http://stub.invalid");
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      headers[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
    }
    const recorded: RecordedRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      url: url.pathname + url.search,
      query: Object.fromEntries(url.searchParams),
      headers,
      body: Buffer.concat(chunks).toString("utf8"),
      at: Date.now(),
    };
    requests.push(recorded);
    let out: StubResponse;
    try {
      out = await handler(recorded);
    } catch (error) {
      out = { status: 500, body: { stub_error: String(error instanceof Error ? error.message : error) } };
    }
    const outHeaders: Record<string, string> = { ...(out.headers ?? {}) };
    let payload = "";
    if (out.body !== undefined) {
      if (typeof out.body === "string") {
        payload = out.body;
      } else {
        payload = JSON.stringify(out.body);
        if (!hasHeader(outHeaders, "content-type")) outHeaders["content-type"] = "application/json; charset=utf-8";
      }
    }
    outHeaders["content-length"] = String(Buffer.byteLength(payload));
    res.writeHead(out.status, outHeaders);
    res.end(payload);
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  let closed = false;
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: async () => {
      if (closed) return;
      closed = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

function hasHeader(headers: Record<string, string>, name: string): boolean {
  return Object.keys(headers).some((key) => key.toLowerCase() === name);
}

export function json(status: number, body: object, headers: Record<string, string> = {}): StubResponse {
  return { status, headers: { "content-type": "application/json; charset=utf-8", ...headers }, body };
}

export function html(status: number, body: string): StubResponse {
  return { status, headers: { "content-type": "text/html; charset=utf-8" }, body };
}

export function redirect(location: string, status = 302): StubResponse {
  return { status, headers: { location }, body: "" };
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Parses an application/x-www-form-urlencoded body into a flat record (last value wins). */
export function parseForm(body: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(body));
}

/** Deterministic, realistic-looking ids: same seed and sequence → same ids. */
export function idFactory(seed: string): (prefix: string, length?: number) => string {
  const counters = new Map<string, number>();
  const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  return (prefix, length = 24) => {
    const n = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, n);
    let out = "";
    let block = 0;
    while (out.length < length) {
      const digest = createHash("sha256").update(`${seed}:${prefix}:${n}:${block++}`).digest();
      for (const byte of digest) {
        if (out.length >= length) break;
        out += alphabet[byte % alphabet.length];
      }
    }
    return prefix + out;
  };
}

let instances = 0;
/** A default seed that differs for every stub started in this process (ids never collide across stubs). */
export function defaultSeed(name: string): string {
  instances += 1;
  return `${name}-${instances}`;
}
