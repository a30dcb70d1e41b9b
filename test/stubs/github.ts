// GitHub OAuth app stub: github.com/login/oauth/* plus api.github.com/user{,/emails} (served
// under /api). Speaks GitHub's wire format: token errors come back with HTTP 200 and an
// `error` field; JSON only when `Accept: application/json`, form-encoded otherwise.
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

export type GitHubEmail = { email: string; primary: boolean; verified: boolean; visibility: "public" | "private" | null };

export type GitHubUser = {
  id: number;
  login: string;
  name: string | null;
  /** the account's primary email (listed by /user/emails) */
  email: string | null;
  email_verified: boolean;
  /** what `GET /user` shows as `email` (GitHub shows only a *public* email; null by default, as for most users) */
  public_email: string | null;
  avatar_url: string;
  /** full /user/emails answer; derived from email/email_verified when omitted */
  emails?: GitHubEmail[];
};

export const DEFAULT_GITHUB_USER: GitHubUser = {
  id: 583231,
  login: "octocat",
  name: "The Octocat",
  email: "octocat@example.com",
  email_verified: true,
  public_email: null,
  avatar_url: "https://avatars.githubusercontent.com/u/583231?v=4",
};

export type GitHubStubOptions = {
  clientId?: string;
  clientSecret?: string;
  /** the app's registered callback URL; while unset, any redirect_uri is accepted */
  redirectUri?: string;
  user?: Partial<GitHubUser>;
  /** reject authorize requests without an S256 code_challenge (default true) */
  requirePkce?: boolean;
  /** api.github.com answers 403 to requests without a User-Agent (default true, like GitHub) */
  requireUserAgent?: boolean;
  seed?: string;
};

const DOCS = "https://docs.github.com/apps/managing-oauth-apps";

export type GitHubStub = Awaited<ReturnType<typeof startGitHubStub>>;

export async function startGitHubStub(opts: GitHubStubOptions = {}) {
  const clientId = opts.clientId ?? "gh-client-id";
  const clientSecret = opts.clientSecret ?? "gh-client-secret";
  const requirePkce = opts.requirePkce ?? true;
  const requireUserAgent = opts.requireUserAgent ?? true;
  const nextId = idFactory(opts.seed ?? defaultSeed("github"));
  let registeredRedirectUri: string | undefined = opts.redirectUri;
  let user: GitHubUser = { ...DEFAULT_GITHUB_USER, ...opts.user };
  let denyNext: string | null = null;
  const tokenFailures: TokenFailure[] = [];
  const apiFailures: TokenFailure[] = [];
  const codes = new Map<string, IssuedCode<GitHubUser>>();
  const accessTokens: AccessTokenRecord<GitHubUser>[] = [];
  let tokenCalls = 0;
  let authorizeCalls = 0;

  function authorize(req: RecordedRequest): StubResponse {
    authorizeCalls += 1;
    const q = req.query;
    if (q["client_id"] !== clientId) {
      return html(404, "<h1>404</h1><p>This is not the web page you are looking for.</p>");
    }
    const redirectUri = q["redirect_uri"] ?? registeredRedirectUri;
    if (redirectUri === undefined) return html(400, "<p>redirect_uri is required (no callback URL registered).</p>");
    const state = q["state"] ?? null;
    if (registeredRedirectUri !== undefined && redirectUri !== registeredRedirectUri) {
      // GitHub sends the user to the *registered* callback URL with the error.
      return redirect(
        withQuery(registeredRedirectUri, {
          error: "redirect_uri_mismatch",
          error_description: "The redirect_uri MUST match the registered callback URL for this application.",
          error_uri: `${DOCS}/troubleshooting-authorization-request-errors/#redirect-uri-mismatch`,
          state,
        }),
      );
    }
    const challenge = q["code_challenge"] ?? null;
    const method = challenge === null ? null : (q["code_challenge_method"] ?? "plain");
    if ((requirePkce && challenge === null) || (method !== null && method !== "S256")) {
      return redirect(
        withQuery(redirectUri, {
          error: "invalid_request",
          error_description: "code_challenge with code_challenge_method=S256 is required.",
          state,
        }),
      );
    }
    if (denyNext !== null) {
      const description = denyNext;
      denyNext = null;
      return redirect(
        withQuery(redirectUri, {
          error: "access_denied",
          error_description: description,
          error_uri: `${DOCS}/troubleshooting-authorization-request-errors/#access-denied`,
          state,
        }),
      );
    }
    const code = nextId("", 20).toLowerCase().replace(/[^0-9a-f]/g, (c) => (c.charCodeAt(0) % 16).toString(16));
    codes.set(code, {
      code,
      clientId,
      redirectUri: q["redirect_uri"] ?? null,
      codeChallenge: challenge,
      codeChallengeMethod: method,
      scopes: (q["scope"] ?? "").split(/[\s,]+/).filter(Boolean),
      state,
      nonce: null,
      user: structuredClone(user),
      used: false,
      issuedAt: Date.now(),
      params: { ...q },
    });
    return redirect(withQuery(redirectUri, { code, state }));
  }

  function tokenAnswer(req: RecordedRequest, body: Record<string, string>): StubResponse {
    const accept = req.headers["accept"] ?? "";
    if (accept.includes("application/json")) return json(200, body);
    return {
      status: 200,
      headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
      body: new URLSearchParams(body).toString(),
    };
  }

  function tokenError(req: RecordedRequest, error: string, description: string, anchor: string): StubResponse {
    return tokenAnswer(req, {
      error,
      error_description: description,
      error_uri: `${DOCS}/troubleshooting-oauth-app-access-token-request-errors/#${anchor}`,
    });
  }

  function token(req: RecordedRequest): StubResponse {
    tokenCalls += 1;
    const failure = tokenFailures.shift();
    if (failure) return failureResponse(failure);
    const contentType = req.headers["content-type"] ?? "";
    let form: Record<string, string> = { ...req.query };
    if (contentType.includes("application/json")) {
      try {
        form = { ...form, ...(JSON.parse(req.body) as Record<string, string>) };
      } catch {
        return tokenAnswer(req, { error: "invalid_request", error_description: "Problems parsing JSON" });
      }
    } else {
      form = { ...form, ...parseForm(req.body) };
    }
    const auth = readClientAuth(req, form);
    if (!auth.ok || auth.clientId !== clientId || auth.clientSecret === undefined || !safeEqual(auth.clientSecret, clientSecret)) {
      return tokenError(req, "incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.", "incorrect-client-credentials");
    }
    const record = form["code"] === undefined ? undefined : codes.get(form["code"]);
    const badCode = () => tokenError(req, "bad_verification_code", "The code passed is incorrect or expired.", "bad-verification-code");
    if (!record || record.used || Date.now() - record.issuedAt > CODE_TTL_MS) return badCode();
    record.used = true; // single use: any exchange attempt burns the code
    const expectedRedirect = record.redirectUri ?? registeredRedirectUri;
    if (form["redirect_uri"] !== undefined && form["redirect_uri"] !== expectedRedirect) {
      return tokenError(req, "redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.", "redirect-uri-mismatch");
    }
    if (record.codeChallenge !== null) {
      const verifier = form["code_verifier"];
      if (verifier === undefined || !pkceMatches(record.codeChallenge, record.codeChallengeMethod ?? "plain", verifier)) {
        return tokenError(req, "bad_verification_code", "The code_verifier does not match the code_challenge.", "bad-verification-code");
      }
    }
    const accessToken = nextId("gho_", 36);
    accessTokens.push({ token: accessToken, clientId, scopes: record.scopes, user: record.user, issuedAt: Date.now(), revoked: false });
    return tokenAnswer(req, { access_token: accessToken, token_type: "bearer", scope: record.scopes.join(",") });
  }

  function api(req: RecordedRequest, resource: "user" | "emails"): StubResponse {
    if (requireUserAgent && !req.headers["user-agent"]) {
      return {
        status: 403,
        headers: { "content-type": "text/plain; charset=utf-8" },
        body: "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes.\n",
      };
    }
    const failure = apiFailures.shift();
    if (failure) return failureResponse(failure);
    const presented = bearerToken(req, ["bearer", "token"]);
    if (presented === null) {
      return json(401, { message: "Requires authentication", documentation_url: "https://docs.github.com/rest", status: "401" });
    }
    const record = accessTokens.find((t) => t.token === presented && !t.revoked);
    if (!record) {
      return json(401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest", status: "401" });
    }
    const headers = { "x-oauth-scopes": record.scopes.join(", "), "x-github-media-type": "github.v3; format=json" };
    const u = record.user;
    if (resource === "user") {
      return json(200, userBody(u), headers);
    }
    if (!record.scopes.includes("user:email") && !record.scopes.includes("user")) {
      return json(
        404,
        { message: "Not Found", documentation_url: "https://docs.github.com/rest/users/emails#list-email-addresses-for-the-authenticated-user", status: "404" },
        headers,
      );
    }
    return json(200, emailsOf(u), headers);
  }

  function userBody(u: GitHubUser) {
    return {
      login: u.login,
      id: u.id,
      node_id: `MDQ6VXNlcj${u.id}`,
      avatar_url: u.avatar_url,
      gravatar_id: "",
      url: `https://api.github.com/users/${u.login}`,
      html_url: `https://github.com/${u.login}`,
      type: "User",
      site_admin: false,
      name: u.name,
      company: null,
      blog: "",
      location: null,
      email: u.public_email,
      hireable: null,
      bio: null,
      twitter_username: null,
      public_repos: 8,
      public_gists: 8,
      followers: 20,
      following: 0,
      created_at: "2011-01-25T18:44:36Z",
      updated_at: "2024-01-22T12:00:00Z",
    };
  }

  const http = await startHttpStub((req) => {
    if (req.method === "GET" && req.path === "/login/oauth/authorize") return authorize(req);
    if (req.method === "POST" && req.path === "/login/oauth/access_token") return token(req);
    if (req.method === "GET" && req.path === "/api/user") return api(req, "user");
    if (req.method === "GET" && req.path === "/api/user/emails") return api(req, "emails");
    if (req.path.startsWith("/api/")) {
      return json(404, { message: "Not Found", documentation_url: "https://docs.github.com/rest", status: "404" });
    }
    return html(404, `<p>Not Found: ${escapeHtml(req.method)} ${escapeHtml(req.path)}</p>`);
  });

  const origin = http.origin;
  return {
    origin,
    clientId,
    clientSecret,
    /** github.com/login/oauth/authorize */
    authorizeUrl: `${origin}/login/oauth/authorize`,
    /** github.com/login/oauth/access_token */
    tokenUrl: `${origin}/login/oauth/access_token`,
    /** stands for https://api.github.com */
    apiBase: `${origin}/api`,
    userUrl: `${origin}/api/user`,
    emailsUrl: `${origin}/api/user/emails`,
    requests: http.requests,
    /** every access token issued, in order */
    accessTokens,
    get tokenCalls() {
      return tokenCalls;
    },
    get authorizeCalls() {
      return authorizeCalls;
    },
    get redirectUri() {
      return registeredRedirectUri;
    },
    /** who logs in at the next authorize (defaults are merged in) */
    setUser(next: Partial<GitHubUser>) {
      user = { ...DEFAULT_GITHUB_USER, ...next };
    },
    setRedirectUri(uri: string | undefined) {
      registeredRedirectUri = uri;
    },
    /** the next authorize redirects back with error=access_denied (the user clicked Cancel) */
    denyNext(description = "The user has denied your application access.") {
      denyNext = description;
    },
    /**
     * The next token call fails. With a status >= 300 (default 500) it answers that status; with 200
     * it answers GitHub-style `{"error": code}` in a 200, e.g. failTokenNext(200, "bad_verification_code").
     */
    failTokenNext(status = 500, error = "server_error") {
      tokenFailures.push(
        status === 200
          ? { status: 200, body: { error, error_description: "Injected failure.", error_uri: `${DOCS}/troubleshooting-oauth-app-access-token-request-errors/` } }
          : { status, body: status >= 500 ? "<h1>Server Error</h1>" : { error, error_description: "Injected failure." } },
      );
    },
    /** the next /api call answers this status with GitHub's error shape */
    failApiNext(status = 500) {
      apiFailures.push({ status, body: { message: status >= 500 ? "Server Error" : "Injected failure", documentation_url: "https://docs.github.com/rest", status: String(status) } });
    },
    /** invalidate every issued access token (the user revoked the app) */
    revokeAccessTokens() {
      for (const t of accessTokens) t.revoked = true;
    },
    close: http.close,
  };
}

export function emailsOf(u: GitHubUser): GitHubEmail[] {
  if (u.emails) return u.emails;
  return u.email === null ? [] : [{ email: u.email, primary: true, verified: u.email_verified, visibility: u.public_email === u.email ? "public" : "private" }];
}

function failureResponse(failure: TokenFailure): StubResponse {
  const body = failure.body;
  if (typeof body === "string") return { status: failure.status, headers: { "content-type": "text/html; charset=utf-8", ...failure.headers }, body };
  return json(failure.status, body ?? {}, failure.headers);
}
