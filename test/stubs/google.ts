// Google OAuth 2.0 / OpenID Connect stub: accounts.google.com/o/oauth2/v2/auth,
// oauth2.googleapis.com/token, openidconnect.googleapis.com/v1/userinfo and
// www.googleapis.com/oauth2/v3/certs, all as paths on one local server. ID tokens are RS256
// JWTs signed by a key generated at start; its public half is served as the JWKS.
import { exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";
import { createHash } from "node:crypto";
import { defaultSeed, escapeHtml, html, idFactory, json, parseForm, redirect, startHttpStub, type RecordedRequest, type StubResponse } from "./http.ts";
import {
  bearerToken,
  CODE_TTL_MS,
  pkceMatches,
  readClientAuth,
  safeEqual,
  withQuery,
  type AccessTokenRecord,
  type IssuedCode,
  type TokenFailure,
} from "./oauth-common.ts";

export type GoogleUser = {
  /** stable Google account id (a decimal string) */
  sub: string;
  name: string;
  given_name?: string;
  family_name?: string;
  email: string;
  email_verified: boolean;
  picture: string;
  /** Workspace domain, if any */
  hd?: string;
};

export const DEFAULT_GOOGLE_USER: GoogleUser = {
  sub: "110169484474386276334",
  name: "Ada Lovelace",
  given_name: "Ada",
  family_name: "Lovelace",
  email: "ada@example.com",
  email_verified: true,
  picture: "https://lh3.googleusercontent.com/a/ACg8ocStubPicture=s96-c",
};

export type GoogleStubOptions = {
  clientId?: string;
  clientSecret?: string;
  /** the registered redirect URI; while unset, any redirect_uri is accepted */
  redirectUri?: string;
  user?: Partial<GoogleUser>;
  /** reject authorize requests without an S256 code_challenge (default true) */
  requirePkce?: boolean;
  /** `iss` of ID tokens (default "https://accounts.google.com", as Google) */
  issuer?: string;
  /** access token / ID token lifetime in seconds (default 3599 / 3600 like Google) */
  expiresIn?: number;
  seed?: string;
};

const SCOPE_URL: Record<string, string> = {
  email: "https://www.googleapis.com/auth/userinfo.email",
  profile: "https://www.googleapis.com/auth/userinfo.profile",
};

function normalizeScope(scope: string): string {
  if (scope === SCOPE_URL["email"]) return "email";
  if (scope === SCOPE_URL["profile"]) return "profile";
  return scope;
}

export type GoogleStub = Awaited<ReturnType<typeof startGoogleStub>>;

export async function startGoogleStub(opts: GoogleStubOptions = {}) {
  const clientId = opts.clientId ?? "google-client-id.apps.googleusercontent.com";
  const clientSecret = opts.clientSecret ?? "GOCSPX-google-client-secret";
  const requirePkce = opts.requirePkce ?? true;
  const issuer = opts.issuer ?? "https://accounts.google.com";
  const expiresIn = opts.expiresIn ?? 3599;
  const nextId = idFactory(opts.seed ?? defaultSeed("google"));
  let registeredRedirectUri: string | undefined = opts.redirectUri;
  let user: GoogleUser = makeUser(opts.user ?? {});
  let denyNext: { description: string | null } | null = null;
  const tokenFailures: TokenFailure[] = [];
  const apiFailures: TokenFailure[] = [];
  const codes = new Map<string, IssuedCode<GoogleUser>>();
  const accessTokens: AccessTokenRecord<GoogleUser>[] = [];
  const idTokens: string[] = [];
  let tokenCalls = 0;
  let authorizeCalls = 0;

  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = createHash("sha256").update(JSON.stringify(await exportJWK(publicKey))).digest("hex").slice(0, 40);
  const publicJwk: JWK = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" };

  function errorPage(status: number, error: string, detail: string): StubResponse {
    return html(status, `<h1>Access blocked: authorization error</h1><p>Error ${status}: ${escapeHtml(error)}</p><p>${escapeHtml(detail)}</p>`);
  }

  function authorize(req: RecordedRequest): StubResponse {
    authorizeCalls += 1;
    const q = req.query;
    if (q["client_id"] !== clientId) return errorPage(401, "invalid_client", "The OAuth client was not found.");
    const redirectUri = q["redirect_uri"];
    if (redirectUri === undefined) return errorPage(400, "invalid_request", "Missing required parameter: redirect_uri");
    if (registeredRedirectUri !== undefined && redirectUri !== registeredRedirectUri) {
      return errorPage(400, "redirect_uri_mismatch", `You can't sign in to this app because it doesn't comply with Google's OAuth 2.0 policy. redirect_uri=${redirectUri}`);
    }
    if (q["response_type"] !== "code") return errorPage(400, "unsupported_response_type", `Invalid response_type: ${q["response_type"] ?? ""}`);
    if (!q["scope"]) return errorPage(400, "invalid_request", "Missing required parameter: scope");
    const challenge = q["code_challenge"] ?? null;
    const method = challenge === null ? null : (q["code_challenge_method"] ?? "plain");
    if (method !== null && method !== "S256" && method !== "plain") return errorPage(400, "invalid_request", "Invalid code_challenge_method");
    if (requirePkce && (challenge === null || method !== "S256")) {
      return errorPage(400, "invalid_request", "code_challenge with code_challenge_method=S256 is required (stub policy).");
    }
    const state = q["state"] ?? null;
    if (denyNext !== null) {
      const { description } = denyNext;
      denyNext = null;
      return redirect(withQuery(redirectUri, { error: "access_denied", error_description: description, state }));
    }
    const code = `4/0A${nextId("", 70)}`;
    codes.set(code, {
      code,
      clientId,
      redirectUri,
      codeChallenge: challenge,
      codeChallengeMethod: method,
      scopes: q["scope"].split(/\s+/).filter(Boolean).map(normalizeScope),
      state,
      nonce: q["nonce"] ?? null,
      user: structuredClone(user),
      used: false,
      issuedAt: Date.now(),
      params: { ...q },
    });
    return redirect(withQuery(redirectUri, { state, code, scope: grantedScope(q["scope"].split(/\s+/).map(normalizeScope)), authuser: "0", prompt: "consent" }));
  }

  function grantedScope(scopes: string[]): string {
    return scopes.map((s) => SCOPE_URL[s] ?? s).join(" ");
  }

  async function token(req: RecordedRequest): Promise<StubResponse> {
    tokenCalls += 1;
    const failure = tokenFailures.shift();
    if (failure) return failureResponse(failure);
    let form: Record<string, string>;
    if ((req.headers["content-type"] ?? "").includes("application/json")) {
      try {
        form = JSON.parse(req.body) as Record<string, string>;
      } catch {
        return json(400, { error: "invalid_request", error_description: "Invalid JSON payload received." });
      }
    } else {
      form = parseForm(req.body);
    }
    const auth = readClientAuth(req, form);
    if (!auth.ok) return json(400, { error: "invalid_request", error_description: auth.reason });
    if (auth.clientId !== clientId) return json(401, { error: "invalid_client", error_description: "The OAuth client was not found." });
    if (auth.clientSecret === undefined || !safeEqual(auth.clientSecret, clientSecret)) {
      return json(401, { error: "invalid_client", error_description: "Unauthorized" });
    }
    if (form["grant_type"] === undefined) return json(400, { error: "invalid_request", error_description: "Missing required parameter: grant_type" });
    if (form["grant_type"] !== "authorization_code") return json(400, { error: "unsupported_grant_type", error_description: `Invalid grant_type: ${form["grant_type"]}` });
    if (form["code"] === undefined) return json(400, { error: "invalid_request", error_description: "Missing required parameter: code" });
    const record = codes.get(form["code"]);
    if (!record) return json(400, { error: "invalid_grant", error_description: "Malformed auth code." });
    if (record.used || Date.now() - record.issuedAt > CODE_TTL_MS) return json(400, { error: "invalid_grant", error_description: "Bad Request" });
    record.used = true; // single use: any exchange attempt burns the code
    if (form["redirect_uri"] === undefined) return json(400, { error: "invalid_request", error_description: "Missing required parameter: redirect_uri" });
    if (form["redirect_uri"] !== record.redirectUri) return json(400, { error: "redirect_uri_mismatch", error_description: "Bad Request" });
    const verifier = form["code_verifier"];
    if (record.codeChallenge === null) {
      if (verifier !== undefined) return json(400, { error: "invalid_request", error_description: "code_verifier or verifier is not needed." });
    } else if (verifier === undefined) {
      return json(400, { error: "invalid_grant", error_description: "Missing code verifier." });
    } else if (!pkceMatches(record.codeChallenge, record.codeChallengeMethod ?? "plain", verifier)) {
      return json(400, { error: "invalid_grant", error_description: "Invalid code verifier." });
    }
    const accessToken = `ya29.${nextId("a0", 120)}`;
    accessTokens.push({ token: accessToken, clientId, scopes: record.scopes, user: record.user, issuedAt: Date.now(), revoked: false });
    const body: Record<string, string | number> = {
      access_token: accessToken,
      expires_in: expiresIn,
      scope: grantedScope(record.scopes),
      token_type: "Bearer",
    };
    if (record.params["access_type"] === "offline") body["refresh_token"] = `1//0${nextId("", 100)}`;
    if (record.scopes.includes("openid")) {
      const idToken = await signIdToken(record, accessToken);
      idTokens.push(idToken);
      body["id_token"] = idToken;
    }
    return json(200, body, { "cache-control": "no-cache, no-store, max-age=0, must-revalidate", pragma: "no-cache" });
  }

  async function signIdToken(record: IssuedCode<GoogleUser>, accessToken: string): Promise<string> {
    const u = record.user;
    const atHash = createHash("sha256").update(accessToken).digest().subarray(0, 16).toString("base64url");
    const claims: Record<string, unknown> = { azp: clientId, at_hash: atHash };
    if (record.scopes.includes("email")) {
      claims["email"] = u.email;
      claims["email_verified"] = u.email_verified;
    }
    if (record.scopes.includes("profile")) Object.assign(claims, profileClaims(u));
    if (u.hd !== undefined) claims["hd"] = u.hd;
    if (record.nonce !== null) claims["nonce"] = record.nonce;
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "RS256", kid, typ: "JWT" })
      .setIssuer(issuer)
      .setAudience(clientId)
      .setSubject(u.sub)
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(privateKey);
  }

  function profileClaims(u: GoogleUser): Record<string, string> {
    const out: Record<string, string> = { name: u.name, picture: u.picture };
    if (u.given_name !== undefined) out["given_name"] = u.given_name;
    if (u.family_name !== undefined) out["family_name"] = u.family_name;
    return out;
  }

  function userinfo(req: RecordedRequest): StubResponse {
    const failure = apiFailures.shift();
    if (failure) return failureResponse(failure);
    const presented = bearerToken(req);
    const record = presented === null ? undefined : accessTokens.find((t) => t.token === presented && !t.revoked);
    if (!record) {
      return json(
        401,
        { error: "invalid_request", error_description: "Invalid Credentials" },
        { "www-authenticate": 'Bearer realm="https://accounts.google.com/", error="invalid_token"' },
      );
    }
    const u = record.user;
    const body: Record<string, unknown> = { sub: u.sub };
    if (record.scopes.includes("profile")) Object.assign(body, profileClaims(u));
    if (record.scopes.includes("email")) {
      body["email"] = u.email;
      body["email_verified"] = u.email_verified;
    }
    if (u.hd !== undefined) body["hd"] = u.hd;
    return json(200, body);
  }

  const http = await startHttpStub(async (req) => {
    if (req.method === "GET" && req.path === "/o/oauth2/v2/auth") return authorize(req);
    if (req.method === "POST" && req.path === "/token") return token(req);
    if (req.path === "/v1/userinfo" || req.path === "/oauth2/v3/userinfo") {
      if (req.method !== "GET" && req.method !== "POST") return json(405, { error: "invalid_request", error_description: "Method not allowed" });
      return userinfo(req);
    }
    if (req.method === "GET" && req.path === "/oauth2/v3/certs") {
      return json(200, { keys: [publicJwk] }, { "cache-control": "public, max-age=21600, must-revalidate" });
    }
    if (req.method === "GET" && req.path === "/.well-known/openid-configuration") return json(200, discovery());
    return html(404, `<p>Error 404 (Not Found): ${escapeHtml(req.method)} ${escapeHtml(req.path)}</p>`);
  });
  const origin = http.origin;

  function discovery() {
    return {
      issuer,
      authorization_endpoint: `${origin}/o/oauth2/v2/auth`,
      token_endpoint: `${origin}/token`,
      userinfo_endpoint: `${origin}/v1/userinfo`,
      jwks_uri: `${origin}/oauth2/v3/certs`,
      response_types_supported: ["code"],
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: ["RS256"],
      scopes_supported: ["openid", "email", "profile"],
      token_endpoint_auth_methods_supported: ["client_secret_post", "client_secret_basic"],
      claims_supported: ["aud", "email", "email_verified", "exp", "family_name", "given_name", "iat", "iss", "name", "picture", "sub"],
      code_challenge_methods_supported: ["plain", "S256"],
      grant_types_supported: ["authorization_code", "refresh_token"],
    };
  }

  return {
    origin,
    clientId,
    clientSecret,
    issuer,
    /** accounts.google.com/o/oauth2/v2/auth */
    authorizeUrl: `${origin}/o/oauth2/v2/auth`,
    /** oauth2.googleapis.com/token */
    tokenUrl: `${origin}/token`,
    /** openidconnect.googleapis.com/v1/userinfo (also served at /oauth2/v3/userinfo) */
    userinfoUrl: `${origin}/v1/userinfo`,
    /** www.googleapis.com/oauth2/v3/certs */
    jwksUrl: `${origin}/oauth2/v3/certs`,
    discoveryUrl: `${origin}/.well-known/openid-configuration`,
    publicJwk,
    requests: http.requests,
    accessTokens,
    /** every ID token issued, in order */
    idTokens,
    get tokenCalls() {
      return tokenCalls;
    },
    get authorizeCalls() {
      return authorizeCalls;
    },
    get redirectUri() {
      return registeredRedirectUri;
    },
    /** who logs in at the next authorize; given_name/family_name are derived from a new name unless given */
    setUser(next: Partial<GoogleUser>) {
      user = makeUser(next);
    },
    setRedirectUri(uri: string | undefined) {
      registeredRedirectUri = uri;
    },
    /** the next authorize redirects back with error=access_denied (Google sends no description unless given) */
    denyNext(description: string | null = null) {
      denyNext = { description };
    },
    /** the next token call answers `status` (default 500); 4xx answers carry an OAuth error JSON `{error}` */
    failTokenNext(status = 500, error = "invalid_grant") {
      tokenFailures.push(
        status >= 500
          ? { status, body: { error: "internal_failure", error_description: "Backend Error" } }
          : { status, body: { error, error_description: "Injected failure." } },
      );
    },
    /** the next userinfo call answers this status */
    failApiNext(status = 500) {
      apiFailures.push({ status, body: { error: status >= 500 ? "internal_failure" : "invalid_request", error_description: "Injected failure." } });
    },
    revokeAccessTokens() {
      for (const t of accessTokens) t.revoked = true;
    },
    close: http.close,
  };
}

function makeUser(partial: Partial<GoogleUser>): GoogleUser {
  const out: GoogleUser = { ...DEFAULT_GOOGLE_USER, ...partial };
  if (partial.name !== undefined && partial.given_name === undefined && partial.family_name === undefined) {
    const [given, ...rest] = partial.name.split(" ");
    out.given_name = given ?? partial.name;
    if (rest.length > 0) out.family_name = rest.join(" ");
    else delete out.family_name;
  }
  return out;
}

function failureResponse(failure: TokenFailure): StubResponse {
  const body = failure.body;
  if (typeof body === "string") return { status: failure.status, headers: { "content-type": "text/html; charset=utf-8", ...failure.headers }, body };
  return json(failure.status, body ?? {}, failure.headers);
}
