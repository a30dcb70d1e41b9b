// OAuth login with provider A (GitHub) and provider B (Google), driven over HTTP the way a
// product's front end and a browser drive it, against the GitHub and Google stubs.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf, type Res } from '../helpers/http.ts';
import { startGitHubStub, type GitHubStub } from '../stubs/github.ts';
import { startGoogleStub, type GoogleStub } from '../stubs/google.ts';

let gw: TestGateway;
let gh: GitHubStub;
let gg: GoogleStub;
let admin: ReturnType<typeof client>;
let guest: ReturnType<typeof client>;
let callback: string;
/** Every body the gateway sent in this file, scanned for secrets at the end. */
const seen: string[] = [];

const record = <T extends Res>(r: T): T => {
  seen.push(r.text);
  return r;
};

before(async () => {
  [gh, gg] = await Promise.all([startGitHubStub(), startGoogleStub()]);
  gw = await startGateway();
  admin = client(gw.url, gw.adminKey);
  guest = client(gw.url);
  callback = `${gw.url}/v1/accounts/oauth/callback`;
  // The stubs check the redirect URI against the registered callback, as the providers do.
  gh.setRedirectUri(callback);
  gg.setRedirectUri(callback);
  // Configured the way an operator does: through the env table.
  const env = {
    OAUTH_A_CLIENT_ID: gh.clientId,
    OAUTH_A_CLIENT_SECRET: gh.clientSecret,
    OAUTH_A_AUTHORIZE_URL: gh.authorizeUrl,
    OAUTH_A_TOKEN_URL: gh.tokenUrl,
    OAUTH_A_API_URL: gh.apiBase,
    OAUTH_B_CLIENT_ID: gg.clientId,
    OAUTH_B_CLIENT_SECRET: gg.clientSecret,
    OAUTH_B_AUTHORIZE_URL: gg.authorizeUrl,
    OAUTH_B_TOKEN_URL: gg.tokenUrl,
    OAUTH_B_USERINFO_URL: gg.userinfoUrl,
  };
  const content = Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join('\n');
  assert.equal((await admin.post('/v1/env/import', { content })).status, 200);
  for (const city_id of ['c-gh', 'c-gg', 'c-other', 'c-fail', 'c-ret', 'c-link', 'c-list']) {
    assert.equal((await admin.post('/v1/cities/create', { name: city_id, city_id })).status, 200);
  }
});
after(async () => {
  await gw?.stop();
  await Promise.all([gh?.close(), gg?.close()]);
});

type Provider = 'github' | 'google';

async function start(city_id: string, provider: Provider, extra: object = {}) {
  const r = record(await guest.post('/v1/accounts/oauth/start', { city_id, provider, ...extra }));
  assert.equal(r.status, 200, r.text);
  assert.equal(typeof r.body.state, 'string');
  assert.equal(typeof r.body.url, 'string');
  return r.body as { state: string; url: string };
}

/** The browser at the provider: consents and is sent back; returns the callback URL. */
async function authorize(url: string): Promise<string> {
  const res = await fetch(url, { redirect: 'manual' });
  assert.equal(res.status, 302, `authorize answered ${res.status}: ${await res.text()}`);
  const location = res.headers.get('location')!;
  assert.ok(location.startsWith(callback + '?'), location);
  return location;
}

/** The browser arriving at the gateway's callback. */
async function arrive(url: string) {
  const res = await fetch(url, { redirect: 'manual' });
  const text = await res.text();
  seen.push(text, res.headers.get('location') ?? '');
  return { status: res.status, headers: res.headers, text };
}

async function result(state: string) {
  return record(await guest.get(`/v1/accounts/oauth/result?state=${encodeURIComponent(state)}`));
}

async function login(city_id: string, provider: Provider) {
  const s = await start(city_id, provider);
  const cb = await arrive(await authorize(s.url));
  assert.equal(cb.status, 200, cb.text);
  assert.match(cb.headers.get('content-type')!, /^text\/html/);
  assert.match(cb.text, /Signed in/);
  const r = await result(s.state);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.status, 'done');
  assert.equal(r.body.city_id, city_id);
  return { ...s, token: r.body.user_token as string, userId: r.body.user_id as string, body: r.body };
}

async function users(city_id: string): Promise<{ user_id: string; created_via: string }[]> {
  const r = record(await admin.get(`/v1/accounts/users?city_id=${city_id}&limit=200`));
  assert.equal(r.status, 200, r.text);
  return r.body.items;
}

describe('accounts: OAuth login', () => {
  test('providers lists local, github and google, and the callback URL', async () => {
    const r = record(await guest.get('/v1/accounts/providers'));
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.items.map((p: { id: string }) => p.id), ['local', 'github', 'google']);
    assert.equal(r.body.callback_url, callback);
  });

  test('GitHub: start → authorize → callback → result done → token works for the city; me shows the profile', async () => {
    gh.setUser({ id: 4242, login: 'grace', name: 'Grace Hopper', email: 'grace@example.com', email_verified: true, avatar_url: 'https://avatars.example/g.png' });
    const tokenCallsBefore = gh.tokenCalls;
    const a = await login('c-gh', 'github');
    assert.match(a.body.expires_at, /^\d{4}-\d\d-\d\dT/);
    assert.equal(gh.tokenCalls, tokenCallsBefore + 1);
    // What the gateway sent to GitHub: PKCE S256, the registered callback, Basic client auth, a User-Agent.
    const auth = gh.requests.filter((r) => r.path === '/login/oauth/authorize').at(-1)!;
    assert.equal(auth.query.code_challenge_method, 'S256');
    assert.equal(auth.query.redirect_uri, callback);
    assert.match(auth.query.scope!, /user:email/);
    const tok = gh.requests.filter((r) => r.path === '/login/oauth/access_token').at(-1)!;
    assert.match(tok.headers.authorization!, /^Basic /);
    assert.ok(gh.requests.filter((r) => r.path === '/api/user').at(-1)!.headers['user-agent']);

    const me = client(gw.url, a.token);
    const current = record(await me.get('/v1/cities/current'));
    assert.equal(current.status, 200);
    assert.equal(current.body.city_id, 'c-gh');
    const profile = record(await me.get('/v1/accounts/me'));
    assert.equal(profile.status, 200, profile.text);
    assert.equal(profile.body.user_id, a.userId);
    assert.equal(profile.body.city_id, 'c-gh');
    assert.equal(profile.body.name, 'Grace Hopper');
    assert.equal(profile.body.email, 'grace@example.com');
    assert.equal(profile.body.email_verified, true);
    assert.equal(profile.body.avatar_url, 'https://avatars.example/g.png');
    assert.deepEqual(
      profile.body.identities.map((i: { provider: string; provider_user_id: string; username: string }) => [i.provider, i.provider_user_id, i.username]),
      [['github', '4242', 'grace']],
    );
    // The token is bound to its city.
    const other = record(await me.get('/v1/cities/current?city_id=c-gg'));
    assert.equal(other.status, 403);

    // The result is handed out once.
    const again = await result(a.state);
    assert.equal(again.status, 410);
    assert.equal(errorOf(again).code, 'result_already_delivered');

    // The same person again → the same user; in another city → another user.
    const b = await login('c-gh', 'github');
    assert.equal(b.userId, a.userId);
    const c = await login('c-other', 'github');
    assert.notEqual(c.userId, a.userId);
    assert.equal((await users('c-gh')).length, 1);
    const otherMe = record(await client(gw.url, c.token).get('/v1/accounts/me'));
    assert.equal(otherMe.body.city_id, 'c-other');
  });

  test('local login never signs in as a user who has an OAuth identity (403 oauth_user); other users still can', async () => {
    gh.setUser({ id: 5151, login: 'oauth-only', name: 'OAuth Only', email: 'oauth-only@example.com', email_verified: true });
    const a = await login('c-gh', 'github');
    const r = record(await guest.post('/v1/accounts/login', { city_id: 'c-gh', user_id: a.userId }));
    assert.equal(r.status, 403, r.text);
    assert.equal(errorOf(r).code, 'oauth_user');
    assert.equal(r.body.user_token, undefined);
    const other = record(await guest.post('/v1/accounts/login', { city_id: 'c-gh', user_id: 'local-only-user' }));
    assert.equal(other.status, 200, other.text);
  });

  test('Google: the full flow, same person same user, another city another user', async () => {
    gg.setUser({ sub: '1000001', name: 'Alan Turing', email: 'alan@example.com', email_verified: true, picture: 'https://pics.example/a.png' });
    const a = await login('c-gg', 'google');
    const auth = gg.requests.filter((r) => r.path === '/o/oauth2/v2/auth').at(-1)!;
    assert.equal(auth.query.code_challenge_method, 'S256');
    assert.equal(auth.query.redirect_uri, callback);
    assert.deepEqual(auth.query.scope!.split(' ').sort(), ['email', 'openid', 'profile']);
    const me = client(gw.url, a.token);
    assert.equal(record(await me.get('/v1/cities/current')).body.city_id, 'c-gg');
    const profile = record(await me.get('/v1/accounts/me'));
    assert.equal(profile.body.name, 'Alan Turing');
    assert.equal(profile.body.email, 'alan@example.com');
    assert.equal(profile.body.email_verified, true);
    assert.equal(profile.body.avatar_url, 'https://pics.example/a.png');
    assert.equal(profile.body.identities[0].provider, 'google');
    assert.equal(profile.body.identities[0].provider_user_id, '1000001');

    const b = await login('c-gg', 'google');
    assert.equal(b.userId, a.userId);
    const c = await login('c-other', 'google');
    assert.notEqual(c.userId, a.userId);
    assert.equal((await users('c-gg')).length, 1);
  });

  test('pending until the callback; unknown state → 404; the result needs a state', async () => {
    const s = await start('c-fail', 'github');
    const r = await result(s.state);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { status: 'pending' });
    const unknown = await result('nope-not-a-state');
    assert.equal(unknown.status, 404);
    assert.equal(errorOf(unknown).code, 'state_not_found');
    assert.equal(record(await guest.get('/v1/accounts/oauth/result')).status, 400);
  });

  test('a replayed callback fails cleanly and creates nothing; concurrent replays: exactly one wins', async () => {
    gh.setUser({ id: 777, login: 'replay', name: 'Re Play', email: 'replay@example.com', email_verified: true });
    const s = await start('c-fail', 'github');
    const url = await authorize(s.url);
    const head = await fetch(url, { method: 'HEAD', redirect: 'manual' });
    assert.equal(head.status, 200, 'a HEAD does not spend the state');
    const first = await arrive(url);
    assert.equal(first.status, 200);
    const before = await users('c-fail');
    const replay = await arrive(url);
    assert.equal(replay.status, 409);
    assert.match(replay.text, /already used/);
    assert.match(replay.text, /state_already_used/);
    assert.deepEqual(await users('c-fail'), before);
    const r = await result(s.state);
    assert.equal(r.body.status, 'done', 'the replay does not spoil the real login');
    assert.equal((await arrive(url)).status, 409);

    const s2 = await start('c-fail', 'github');
    const url2 = await authorize(s2.url);
    const both = await Promise.all([arrive(url2), arrive(url2), arrive(url2)]);
    assert.deepEqual(both.map((b) => b.status).sort(), [200, 409, 409]);
    assert.equal((await result(s2.state)).body.status, 'done');
    assert.equal((await users('c-fail')).length, before.length, 'still the same one user');
  });

  test('a state used for the other provider fails cleanly and creates no user', async () => {
    const before = await users('c-fail');
    // The browser is sent through Google's authorize with the state of a GitHub login.
    const ghLogin = await start('c-fail', 'github');
    const ggLogin = await start('c-fail', 'google');
    const crossed = new URL(ggLogin.url);
    crossed.searchParams.set('state', ghLogin.state);
    const ggTokenCalls = gg.tokenCalls;
    const cb = await arrive(await authorize(crossed.toString()));
    assert.equal(cb.status, 502, cb.text);
    assert.match(cb.text, /Sign-in failed/);
    assert.match(cb.text, /token_exchange_failed/);
    assert.equal(gg.tokenCalls, ggTokenCalls, "Google's code is only ever sent with the GitHub login's verifier, to GitHub");
    const r = await result(ghLogin.state);
    assert.equal(r.body.status, 'failed');
    assert.equal(r.body.error, 'token_exchange_failed');

    // With RFC 9207's iss, the mix-up is caught before any code is sent anywhere.
    const ghLogin2 = await start('c-fail', 'github');
    const ghTokenCalls = gh.tokenCalls;
    const cb2 = await arrive(`${callback}?code=abc&state=${encodeURIComponent(ghLogin2.state)}&iss=${encodeURIComponent('https://accounts.google.com')}`);
    assert.equal(cb2.status, 400);
    assert.match(cb2.text, /provider_mismatch/);
    assert.equal(gh.tokenCalls, ghTokenCalls);
    const r2 = await result(ghLogin2.state);
    assert.deepEqual([r2.body.status, r2.body.error], ['failed', 'provider_mismatch']);
    assert.deepEqual(await users('c-fail'), before);
  });

  test('an expired state fails cleanly: the page says so, the result is 404, no user', async () => {
    const before = await users('c-fail');
    assert.equal((await admin.post('/v1/env/upsert', { key: 'OAUTH_STATE_TTL_SECONDS', value: '1' })).status, 200);
    try {
      const s = await start('c-fail', 'google');
      const url = await authorize(s.url);
      await new Promise((r) => setTimeout(r, 1100));
      const cb = await arrive(url);
      assert.equal(cb.status, 400);
      assert.match(cb.text, /expired/);
      assert.match(cb.text, /state_expired/);
      const r = await result(s.state);
      assert.equal(r.status, 404);
      assert.equal(errorOf(r).code, 'state_not_found');
    } finally {
      await admin.post('/v1/env/remove', { key: 'OAUTH_STATE_TTL_SECONDS' });
    }
    assert.deepEqual(await users('c-fail'), before);
  });

  test('the provider refuses (access_denied): the page says why, the result is failed, no user', async () => {
    const before = await users('c-fail');
    for (const [provider, stub] of [['github', gh], ['google', gg]] as const) {
      const tokenCalls = stub.tokenCalls;
      stub.denyNext();
      const s = await start('c-fail', provider);
      const cb = await arrive(await authorize(s.url));
      assert.equal(cb.status, 400);
      assert.match(cb.text, /cancelled or refused/);
      assert.match(cb.text, /access_denied/);
      assert.equal(stub.tokenCalls, tokenCalls, 'no code exchange after a refusal');
      const r = await result(s.state);
      assert.deepEqual([r.body.status, r.body.error], ['failed', 'access_denied'], provider);
    }
    assert.deepEqual(await users('c-fail'), before);
  });

  test('token endpoint failures (5xx, GitHub 200+error, Google 400): the result is failed, no user', async () => {
    const before = await users('c-fail');
    const cases: [Provider, () => void][] = [
      ['github', () => gh.failTokenNext(500)],
      ['github', () => gh.failTokenNext(200, 'bad_verification_code')],
      ['google', () => gg.failTokenNext(400, 'invalid_grant')],
      ['google', () => gg.failTokenNext(503)],
    ];
    for (const [provider, inject] of cases) {
      inject();
      const s = await start('c-fail', provider);
      const cb = await arrive(await authorize(s.url));
      assert.equal(cb.status, 502, `${provider}: ${cb.text}`);
      assert.match(cb.text, /Sign-in failed/);
      assert.match(cb.text, /token_exchange_failed/);
      const r = await result(s.state);
      assert.deepEqual([r.body.status, r.body.error], ['failed', 'token_exchange_failed']);
      assert.equal((await result(s.state)).body.status, 'failed', 'a failure can be read again');
    }
    // The profile endpoint failing is a failure too.
    gg.failApiNext(500);
    const s = await start('c-fail', 'google');
    await arrive(await authorize(s.url));
    assert.equal((await result(s.state)).body.error, 'profile_fetch_failed');
    assert.deepEqual(await users('c-fail'), before);
  });

  test('return_to: a foreign origin is refused; the public origin and listed origins are redirected to', async () => {
    for (const return_to of ['https://evil.example/steal', 'javascript:alert(1)', `${gw.url.replace('127.0.0.1', 'localhost')}/x`, 'not a url']) {
      const r = record(await guest.post('/v1/accounts/oauth/start', { city_id: 'c-ret', provider: 'github', return_to }));
      assert.equal(r.status, 400, return_to);
      assert.equal(errorOf(r).code, 'return_to_not_allowed');
    }
    gh.setUser({ id: 9001, login: 'ret', name: 'Ret Urn' });
    const s = await start('c-ret', 'github', { return_to: `${gw.url}/app/done?x=1` });
    const cb = await arrive(await authorize(s.url));
    assert.equal(cb.status, 303);
    const loc = new URL(cb.headers.get('location')!);
    assert.equal(loc.origin + loc.pathname, `${gw.url}/app/done`);
    assert.equal(loc.searchParams.get('x'), '1');
    assert.equal(loc.searchParams.get('oauth_state'), s.state);
    assert.equal(loc.searchParams.get('oauth_status'), 'done');
    assert.equal(loc.searchParams.get('code'), null);
    assert.equal(cb.headers.get('referrer-policy'), 'no-referrer');
    assert.equal((await result(s.state)).body.status, 'done');

    await admin.post('/v1/env/upsert', { key: 'OAUTH_ALLOWED_RETURN_ORIGINS', value: 'https://app.example.com, https://other.example' });
    try {
      gg.denyNext();
      const t = await start('c-ret', 'google', { return_to: 'https://app.example.com/login' });
      const back = await arrive(await authorize(t.url));
      assert.equal(back.status, 303);
      const l = new URL(back.headers.get('location')!);
      assert.equal(l.origin, 'https://app.example.com');
      assert.equal(l.searchParams.get('oauth_status'), 'failed');
      assert.equal(l.searchParams.get('oauth_error'), 'access_denied');
      assert.equal(record(await guest.post('/v1/accounts/oauth/start', { city_id: 'c-ret', provider: 'google', return_to: 'https://app.example.com.evil.example/' })).status, 400);
    } finally {
      await admin.post('/v1/env/remove', { key: 'OAUTH_ALLOWED_RETURN_ORIGINS' });
    }
  });

  test('GATEWAY_CITY_BASE_URL makes the callback URL and is an allowed return_to origin', async () => {
    await admin.post('/v1/env/upsert', { key: 'GATEWAY_CITY_BASE_URL', value: 'https://gw.example.com/some/path' });
    try {
      const expected = 'https://gw.example.com/v1/accounts/oauth/callback';
      assert.equal(record(await guest.get('/v1/accounts/providers')).body.callback_url, expected);
      const s = await start('c-ret', 'google', { return_to: 'https://gw.example.com/done' });
      assert.equal(new URL(s.url).searchParams.get('redirect_uri'), expected);
      const foreign = record(await guest.post('/v1/accounts/oauth/start', { city_id: 'c-ret', provider: 'google', return_to: `${gw.url}/done` }));
      assert.equal(foreign.status, 400, 'the request origin is no longer the public one');
    } finally {
      await admin.post('/v1/env/remove', { key: 'GATEWAY_CITY_BASE_URL' });
    }
  });

  test('the callback page escapes what it shows and needs a state', async () => {
    const s = await start('c-fail', 'github');
    const evil = '<script>alert(1)</script>';
    const cb = await arrive(`${callback}?state=${encodeURIComponent(s.state)}&error=${encodeURIComponent(evil)}&error_description=${encodeURIComponent(evil)}`);
    assert.equal(cb.status, 400);
    assert.doesNotMatch(cb.text, /<script/i);
    assert.match(cb.headers.get('content-security-policy')!, /default-src 'none'/);
    assert.equal(cb.headers.get('cache-control'), 'no-store');
    const noState = await arrive(`${callback}?code=x`);
    assert.equal(noState.status, 400);
    assert.match(noState.text, /missing_state/);
    const unknown = await arrive(`${callback}?code=x&state=${encodeURIComponent(evil)}`);
    assert.equal(unknown.status, 400);
    assert.doesNotMatch(unknown.text, /<script/i);
    assert.match(unknown.text, /unknown_state/);
  });

  test('start: bad provider → 400, unknown city → 404, paused city → 403; a paused city cannot collect a token', async () => {
    assert.equal(record(await guest.post('/v1/accounts/oauth/start', { city_id: 'c-fail', provider: 'facebook' })).status, 400);
    const nf = record(await guest.post('/v1/accounts/oauth/start', { city_id: 'ghost', provider: 'github' }));
    assert.equal(nf.status, 404);
    await admin.post('/v1/cities/create', { name: 'P', city_id: 'c-paused' });
    const s = await start('c-paused', 'github');
    await arrive(await authorize(s.url));
    await admin.post('/v1/cities/pause', { city_id: 'c-paused' });
    const r = await result(s.state);
    assert.equal(r.status, 403);
    assert.equal(errorOf(r).code, 'city_paused');
    const p = record(await guest.post('/v1/accounts/oauth/start', { city_id: 'c-paused', provider: 'github' }));
    assert.equal(p.status, 403);
    assert.equal(errorOf(p).code, 'city_paused');
    await admin.post('/v1/cities/activate', { city_id: 'c-paused' });
    assert.equal((await result(s.state)).body.status, 'done');
  });

  test('identities link by a verified email only', async () => {
    gh.setUser({ id: 5001, login: 'linus', name: 'Linus', email: 'same@example.com', email_verified: true });
    const a = await login('c-link', 'github');
    gg.setUser({ sub: '5002', name: 'Linus G', email: 'same@example.com', email_verified: true });
    const b = await login('c-link', 'google');
    assert.equal(b.userId, a.userId, 'both providers verified the email: one person');
    const me = record(await client(gw.url, b.token).get('/v1/accounts/me'));
    assert.deepEqual(me.body.identities.map((i: { provider: string }) => i.provider).sort(), ['github', 'google']);
    gg.setUser({ sub: '5003', name: 'Mallory', email: 'same@example.com', email_verified: false });
    const c = await login('c-link', 'google');
    assert.notEqual(c.userId, a.userId, 'an unverified email links nothing');
    gh.setUser({ id: 5004, login: 'unv', name: 'Unverified', email: 'unv@example.com', email_verified: false });
    const d = await login('c-link', 'github');
    gg.setUser({ sub: '5005', name: 'Verified', email: 'unv@example.com', email_verified: true });
    const e = await login('c-link', 'google');
    assert.notEqual(e.userId, d.userId, 'nor does joining a user whose email is unverified');
    assert.equal((await users('c-link')).length, 4);
  });

  test('users: pages with a cursor; a bureau sees its own city only', async () => {
    for (const u of ['u1', 'u2', 'u3']) await admin.post('/v1/cities/tokens/apply', { city_id: 'c-list', user_id: u });
    const p1 = record(await admin.get('/v1/accounts/users?city_id=c-list&limit=2'));
    assert.equal(p1.body.items.length, 2);
    assert.ok(p1.body.next_cursor);
    const p2 = record(await admin.get(`/v1/accounts/users?city_id=c-list&limit=2&cursor=${p1.body.next_cursor}`));
    assert.deepEqual(p2.body.items.map((u: { user_id: string }) => u.user_id), ['u3']);
    assert.equal(p2.body.next_cursor, null);
    assert.equal(p2.body.items[0].created_via, 'token');
    assert.equal(record(await admin.get('/v1/accounts/users?city_id=c-list&cursor=garbage')).status, 400);
    const bureau = record(await admin.post('/v1/bureaus/create', { city_id: 'c-list', name: 'backend' }));
    const b = client(gw.url, bureau.body.bureau_token);
    const own = record(await b.get('/v1/accounts/users'));
    assert.equal(own.status, 200);
    assert.deepEqual(own.body.items.map((u: { user_id: string }) => u.user_id), ['u1', 'u2', 'u3']);
    assert.equal(record(await b.get('/v1/accounts/users?city_id=c-gh')).status, 403);
    const user = record(await guest.post('/v1/accounts/login', { city_id: 'c-list', user_id: 'u1' }));
    assert.equal(record(await client(gw.url, user.body.user_token).get('/v1/accounts/users')).status, 403);
  });

  test('secrets never appear in any response or log line', async () => {
    seen.push(record(await admin.get('/v1/env/list')).text, record(await admin.get('/v1/services')).text, record(await guest.get('/v1/services')).text);
    const secrets = new Set<string>([gh.clientSecret, gg.clientSecret]);
    for (const t of [...gh.accessTokens, ...gg.accessTokens]) secrets.add(t.token);
    for (const r of [...gh.requests, ...gg.requests]) {
      if (r.path === '/login/oauth/access_token' || r.path === '/token') {
        const form = new URLSearchParams(r.body);
        for (const k of ['code', 'code_verifier']) if (form.get(k)) secrets.add(form.get(k)!);
      }
    }
    for (const id of gg.idTokens) secrets.add(id);
    assert.ok(secrets.size > 20, `collected ${secrets.size} secrets`);
    const logs = gw.stdout() + gw.stderr();
    assert.ok(logs.includes('oauth login'), 'the logins were logged');
    const haystacks = { responses: seen.join('\n'), logs };
    for (const [where, text] of Object.entries(haystacks)) {
      for (const s of secrets) assert.ok(!text.includes(s), `a secret (${s.slice(0, 4)}…) appears in ${where}`);
    }
  });
});
