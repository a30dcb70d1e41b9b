// Self-test of the GitHub and Google OAuth stubs, driven by arctic's real OAuth2Client.
import { CodeChallengeMethod, generateCodeVerifier, generateState, OAuth2Client, OAuth2RequestError, type OAuth2Tokens } from "arctic";
import { createRemoteJWKSet, jwtVerify } from "jose";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { s256 } from "./oauth-common.ts";
import { startGitHubStub, type GitHubStub } from "./github.ts";
import { startGoogleStub, type GoogleStub } from "./google.ts";

const CALLBACK = "http://127.0.0.1:9/v1/accounts/oauth/callback";

/** Follows the authorize URL like a browser that consents, returning the callback URL. */
async function consent(url: URL | string): Promise<URL> {
  const res = await fetch(url, { redirect: "manual" });
  assert.equal(res.status, 302, `authorize answered ${res.status}: ${await res.text()}`);
  return new URL(res.headers.get("location")!);
}

function tokenError(tokens: OAuth2Tokens): string | undefined {
  const data = tokens.data as { error?: string };
  return data.error;
}

describe("github stub", () => {
  let gh: GitHubStub;
  let client: OAuth2Client;
  before(async () => {
    gh = await startGitHubStub({ redirectUri: CALLBACK });
    client = new OAuth2Client(gh.clientId, gh.clientSecret, CALLBACK);
  });
  after(() => gh.close());

  async function login(scopes = ["read:user", "user:email"]) {
    const state = generateState();
    const verifier = generateCodeVerifier();
    const url = client.createAuthorizationURLWithPKCE(gh.authorizeUrl, state, CodeChallengeMethod.S256, verifier, scopes);
    const back = await consent(url);
    return { state, verifier, back, code: back.searchParams.get("code")! };
  }

  test("full flow: authorize → code → token (Basic auth) → /user and /user/emails", async () => {
    gh.setUser({ id: 42, login: "grace", name: "Grace Hopper", email: "grace@example.com", email_verified: true });
    const { state, verifier, back, code } = await login();
    assert.equal(back.origin + back.pathname, CALLBACK);
    assert.equal(back.searchParams.get("state"), state);
    assert.match(code, /^[0-9a-f]{20}$/);
    const authorizeReq = gh.requests.find((r) => r.path === "/login/oauth/authorize")!;
    assert.equal(authorizeReq.query["code_challenge"], s256(verifier));
    assert.equal(authorizeReq.query["code_challenge_method"], "S256");

    const tokens = await client.validateAuthorizationCode(gh.tokenUrl, code, verifier);
    assert.equal(tokenError(tokens), undefined);
    const accessToken = tokens.accessToken();
    assert.match(accessToken, /^gho_/);
    assert.equal(tokens.tokenType(), "bearer");
    assert.equal((tokens.data as { scope: string }).scope, "read:user,user:email");
    assert.equal(gh.tokenCalls, 1);
    assert.deepEqual(gh.accessTokens.map((t) => t.token), [accessToken]);
    const tokenReq = gh.requests.find((r) => r.path === "/login/oauth/access_token")!;
    assert.match(tokenReq.headers["authorization"]!, /^Basic /);

    const headers = { authorization: `Bearer ${accessToken}`, accept: "application/vnd.github+json" };
    const user = (await (await fetch(gh.userUrl, { headers })).json()) as Record<string, unknown>;
    assert.equal(user["id"], 42);
    assert.equal(user["login"], "grace");
    assert.equal(user["name"], "Grace Hopper");
    assert.equal(user["email"], null, "private email is not on /user");
    const emails = await (await fetch(gh.emailsUrl, { headers })).json();
    assert.deepEqual(emails, [{ email: "grace@example.com", primary: true, verified: true, visibility: "private" }]);
  });

  test("client credentials in the body are accepted too; form answer without Accept: json", async () => {
    const { verifier, code } = await login();
    const res = await fetch(gh.tokenUrl, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ client_id: gh.clientId, client_secret: gh.clientSecret, code, code_verifier: verifier, redirect_uri: CALLBACK }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type")!, /x-www-form-urlencoded/);
    const body = new URLSearchParams(await res.text());
    assert.match(body.get("access_token")!, /^gho_/);
    assert.equal(body.get("token_type"), "bearer");
  });

  test("wrong verifier, reused code, wrong redirect_uri, wrong secret: GitHub-style errors with HTTP 200", async () => {
    const a = await login();
    const wrong = await client.validateAuthorizationCode(gh.tokenUrl, a.code, generateCodeVerifier());
    assert.equal(tokenError(wrong), "bad_verification_code");
    assert.throws(() => wrong.accessToken());

    const b = await login();
    assert.ok((await client.validateAuthorizationCode(gh.tokenUrl, b.code, b.verifier)).accessToken());
    const reused = await client.validateAuthorizationCode(gh.tokenUrl, b.code, b.verifier);
    assert.equal(tokenError(reused), "bad_verification_code");

    const c = await login();
    const otherRedirect = new OAuth2Client(gh.clientId, gh.clientSecret, "http://127.0.0.1:9/elsewhere");
    assert.equal(tokenError(await otherRedirect.validateAuthorizationCode(gh.tokenUrl, c.code, c.verifier)), "redirect_uri_mismatch");

    const d = await login();
    const badSecret = new OAuth2Client(gh.clientId, "nope", CALLBACK);
    assert.equal(tokenError(await badSecret.validateAuthorizationCode(gh.tokenUrl, d.code, d.verifier)), "incorrect_client_credentials");
  });

  test("authorize: wrong redirect_uri goes to the registered callback with an error; unknown client 404; missing PKCE refused", async () => {
    const state = generateState();
    const other = new OAuth2Client(gh.clientId, gh.clientSecret, "http://127.0.0.1:9/evil");
    const back = await consent(other.createAuthorizationURLWithPKCE(gh.authorizeUrl, state, CodeChallengeMethod.S256, generateCodeVerifier(), []));
    assert.equal(back.origin + back.pathname, CALLBACK);
    assert.equal(back.searchParams.get("error"), "redirect_uri_mismatch");
    assert.equal(back.searchParams.get("state"), state);
    assert.equal(back.searchParams.get("code"), null);

    const unknown = new OAuth2Client("who", "x", CALLBACK);
    const res = await fetch(unknown.createAuthorizationURL(gh.authorizeUrl, state, []), { redirect: "manual" });
    assert.equal(res.status, 404);
    await res.body?.cancel();

    const noPkce = await consent(client.createAuthorizationURL(gh.authorizeUrl, state, []));
    assert.equal(noPkce.searchParams.get("error"), "invalid_request");
  });

  test("denyNext, failTokenNext, failApiNext, bad token, missing scope, missing User-Agent", async () => {
    gh.denyNext();
    const denied = await login();
    assert.equal(denied.back.searchParams.get("error"), "access_denied");
    assert.ok(denied.back.searchParams.get("error_description"));
    assert.equal(denied.back.searchParams.get("state"), denied.state);
    assert.equal(denied.code, null);

    const a = await login();
    gh.failTokenNext(500);
    await assert.rejects(client.validateAuthorizationCode(gh.tokenUrl, a.code, a.verifier), /Unexpected|500/);
    const b = await login();
    gh.failTokenNext(200, "bad_verification_code");
    assert.equal(tokenError(await client.validateAuthorizationCode(gh.tokenUrl, b.code, b.verifier)), "bad_verification_code");

    const c = await login(["read:user"]);
    const token = (await client.validateAuthorizationCode(gh.tokenUrl, c.code, c.verifier)).accessToken();
    const headers = { authorization: `token ${token}` };
    assert.equal((await fetch(gh.userUrl, { headers })).status, 200);
    assert.equal((await fetch(gh.emailsUrl, { headers })).status, 404, "user:email scope missing");
    gh.failApiNext(502);
    assert.equal((await fetch(gh.userUrl, { headers })).status, 502);
    const bad = await fetch(gh.userUrl, { headers: { authorization: "Bearer gho_nope" } });
    assert.equal(bad.status, 401);
    assert.equal(((await bad.json()) as { message: string }).message, "Bad credentials");
    // undici always adds a User-Agent; a Request built without one shows the rule via node:http
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const r = request(gh.userUrl, { headers: { authorization: `Bearer ${token}` } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      r.on("error", reject);
      r.end();
    });
    assert.equal(status, 403);
  });
});

describe("google stub", () => {
  let g: GoogleStub;
  let client: OAuth2Client;
  before(async () => {
    g = await startGoogleStub({ redirectUri: CALLBACK });
    client = new OAuth2Client(g.clientId, g.clientSecret, CALLBACK);
  });
  after(() => g.close());

  async function login(scopes = ["openid", "email", "profile"], extra: Record<string, string> = {}) {
    const state = generateState();
    const verifier = generateCodeVerifier();
    const url = client.createAuthorizationURLWithPKCE(g.authorizeUrl, state, CodeChallengeMethod.S256, verifier, scopes);
    for (const [k, v] of Object.entries(extra)) url.searchParams.set(k, v);
    const back = await consent(url);
    return { state, verifier, back, code: back.searchParams.get("code")! };
  }

  test("full flow: token with verifiable id_token, userinfo", async () => {
    g.setUser({ sub: "1234567890", name: "Alan Turing", email: "alan@example.com", email_verified: true, picture: "https://example.com/a.png" });
    const { state, verifier, back, code } = await login(["openid", "email", "profile"], { nonce: "n-1", access_type: "offline" });
    assert.equal(back.searchParams.get("state"), state);
    const tokens = await client.validateAuthorizationCode(g.tokenUrl, code, verifier);
    assert.match(tokens.accessToken(), /^ya29\./);
    assert.equal(tokens.tokenType(), "Bearer");
    assert.equal(tokens.accessTokenExpiresInSeconds(), 3599);
    assert.ok(tokens.refreshToken());
    const { payload, protectedHeader } = await jwtVerify(tokens.idToken(), createRemoteJWKSet(new URL(g.jwksUrl)), {
      issuer: "https://accounts.google.com",
      audience: g.clientId,
    });
    assert.equal(protectedHeader.alg, "RS256");
    assert.equal(payload.sub, "1234567890");
    assert.equal(payload["email"], "alan@example.com");
    assert.equal(payload["email_verified"], true);
    assert.equal(payload["nonce"], "n-1");
    assert.equal(g.tokenCalls, 1);

    const res = await fetch(g.userinfoUrl, { headers: { authorization: `Bearer ${tokens.accessToken()}` } });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      sub: "1234567890",
      name: "Alan Turing",
      given_name: "Alan",
      family_name: "Turing",
      picture: "https://example.com/a.png",
      email: "alan@example.com",
      email_verified: true,
    });
  });

  test("credentials in the body work; userinfo follows scopes", async () => {
    const { verifier, code } = await login(["openid"]);
    const res = await fetch(g.tokenUrl, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", code, code_verifier: verifier, redirect_uri: CALLBACK, client_id: g.clientId, client_secret: g.clientSecret }),
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { access_token: string; id_token: string; refresh_token?: string };
    assert.equal(body.refresh_token, undefined);
    const info = await (await fetch(g.userinfoUrl, { headers: { authorization: `Bearer ${body.access_token}` } })).json();
    assert.deepEqual(info, { sub: "1234567890" }, "only sub without email/profile scopes");
  });

  test("wrong verifier, reused code, wrong redirect_uri, wrong secret → OAuth2RequestError", async () => {
    const expectError = async (p: Promise<unknown>, code: string) => {
      await assert.rejects(p, (e: unknown) => e instanceof OAuth2RequestError && e.code === code);
    };
    const a = await login();
    await expectError(client.validateAuthorizationCode(g.tokenUrl, a.code, generateCodeVerifier()), "invalid_grant");
    const b = await login();
    await client.validateAuthorizationCode(g.tokenUrl, b.code, b.verifier);
    await expectError(client.validateAuthorizationCode(g.tokenUrl, b.code, b.verifier), "invalid_grant");
    const c = await login();
    const other = new OAuth2Client(g.clientId, g.clientSecret, "http://127.0.0.1:9/elsewhere");
    await expectError(other.validateAuthorizationCode(g.tokenUrl, c.code, c.verifier), "redirect_uri_mismatch");
    const d = await login();
    await expectError(new OAuth2Client(g.clientId, "bad", CALLBACK).validateAuthorizationCode(g.tokenUrl, d.code, d.verifier), "invalid_client");
  });

  test("authorize errors, denyNext, failTokenNext, setRedirectUri", async () => {
    const other = new OAuth2Client(g.clientId, g.clientSecret, "http://127.0.0.1:9/evil");
    const res = await fetch(other.createAuthorizationURLWithPKCE(g.authorizeUrl, "s", CodeChallengeMethod.S256, generateCodeVerifier(), ["openid"]), { redirect: "manual" });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /redirect_uri_mismatch/);

    g.denyNext();
    const denied = await login();
    assert.equal(denied.back.searchParams.get("error"), "access_denied");
    assert.equal(denied.back.searchParams.get("state"), denied.state);

    const a = await login();
    g.failTokenNext(500);
    await assert.rejects(client.validateAuthorizationCode(g.tokenUrl, a.code, a.verifier));
    const b = await login();
    g.failTokenNext(400, "invalid_grant");
    await assert.rejects(client.validateAuthorizationCode(g.tokenUrl, b.code, b.verifier), OAuth2RequestError);

    const bad = await fetch(g.userinfoUrl, { headers: { authorization: "Bearer ya29.nope" } });
    assert.equal(bad.status, 401);
    await bad.body?.cancel();

    g.setRedirectUri(undefined); // any redirect_uri accepted while none is registered
    const anyClient = new OAuth2Client(g.clientId, g.clientSecret, "http://127.0.0.1:9/anything");
    const back = await consent(anyClient.createAuthorizationURLWithPKCE(g.authorizeUrl, "s", CodeChallengeMethod.S256, generateCodeVerifier(), ["openid"]));
    assert.ok(back.searchParams.get("code"));
    g.setRedirectUri(CALLBACK);
  });
});
