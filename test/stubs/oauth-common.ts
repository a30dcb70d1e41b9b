// Shared OAuth 2.0 pieces for the GitHub and Google stubs: PKCE (RFC 7636), client
// authentication (RFC 6749 §2.3.1: HTTP Basic or body parameters), single-use codes.
import { createHash, timingSafeEqual } from "node:crypto";
import type { RecordedRequest } from "./http.ts";

export function s256(verifier: string): string {
  return createHash("sha256").update(verifier).digest("base64url");
}

export function pkceMatches(challenge: string, method: string, verifier: string): boolean {
  const expected = method === "plain" ? verifier : s256(verifier);
  return safeEqual(expected, challenge);
}

export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export type ClientAuth =
  | { ok: true; method: "basic" | "body" | "none"; clientId: string | undefined; clientSecret: string | undefined }
  | { ok: false; reason: string };

/**
 * Reads client credentials from `Authorization: Basic` (what arctic's OAuth2Client sends when
 * it has a secret; arctic does not form-urlencode id/secret, RFC 6749 says to — both decoded here)
 * or from `client_id`/`client_secret` body parameters. Using both methods at once is an error.
 */
export function readClientAuth(req: RecordedRequest, form: Record<string, string>): ClientAuth {
  const header = req.headers["authorization"];
  if (header !== undefined && /^basic\s+/i.test(header)) {
    if (form["client_secret"] !== undefined) return { ok: false, reason: "multiple client authentication methods" };
    const decoded = Buffer.from(header.replace(/^basic\s+/i, "").trim(), "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) return { ok: false, reason: "malformed basic credentials" };
    const rawId = decoded.slice(0, colon);
    const rawSecret = decoded.slice(colon + 1);
    const clientId = tryDecode(rawId);
    if (form["client_id"] !== undefined && form["client_id"] !== clientId && form["client_id"] !== rawId) {
      return { ok: false, reason: "client_id in body does not match basic credentials" };
    }
    return { ok: true, method: "basic", clientId, clientSecret: tryDecode(rawSecret) };
  }
  if (form["client_id"] !== undefined || form["client_secret"] !== undefined) {
    return { ok: true, method: "body", clientId: form["client_id"], clientSecret: form["client_secret"] };
  }
  return { ok: true, method: "none", clientId: undefined, clientSecret: undefined };
}

function tryDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, " "));
  } catch {
    return value;
  }
}

export type IssuedCode<U> = {
  code: string;
  clientId: string;
  /** redirect_uri sent to the authorize endpoint, or null if it was omitted */
  redirectUri: string | null;
  codeChallenge: string | null;
  codeChallengeMethod: string | null;
  scopes: string[];
  state: string | null;
  nonce: string | null;
  user: U;
  used: boolean;
  issuedAt: number;
  /** extra authorize parameters the provider cares about (e.g. Google access_type) */
  params: Record<string, string>;
};

export type AccessTokenRecord<U> = {
  token: string;
  clientId: string;
  scopes: string[];
  user: U;
  issuedAt: number;
  revoked: boolean;
};

export type TokenFailure = { status: number; body?: object | string; headers?: Record<string, string> };

/** Appends query parameters to a redirect URI, keeping the ones it already has. */
export function withQuery(base: string, params: Record<string, string | undefined | null>): string {
  const url = new URL(base);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) url.searchParams.set(key, value);
  }
  return url.toString();
}

export function bearerToken(req: RecordedRequest, schemes: string[] = ["bearer"]): string | null {
  const header = req.headers["authorization"];
  if (!header) return null;
  const match = /^(\S+)\s+(\S+)\s*$/.exec(header);
  if (!match) return null;
  return schemes.includes(match[1]!.toLowerCase()) ? match[2]! : null;
}

export const CODE_TTL_MS = 10 * 60 * 1000;
