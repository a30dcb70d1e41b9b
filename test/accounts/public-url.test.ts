// The public URL never comes from the Host header (docs/security.md): a spoofed Host changes no
// URL the gateway hands out. Without GATEWAY_CITY_BASE_URL a gateway on loopback uses a loopback
// request's own origin and refuses any other Host with 503 public_url_not_configured (OAuth start,
// checkout) before anything is written; with it, the configured URL is used whatever the Host.
// And local login is local: on by default only for a loopback listener.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { isLoopbackHost, localLoginWarning, readNodeConfig } from '../../src/runtimes/node/config.ts';
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { client, errorOf, type Res } from '../helpers/http.ts';
import { startGitHubStub, type GitHubStub } from '../stubs/github.ts';
import { startStripeStub, type StripeStub } from '../stubs/stripe.ts';

let gw: TestGateway;
let gh: GitHubStub;
let stripe: StripeStub;
let admin: ReturnType<typeof client>;
let alice: string;

/** A POST with a Host header of the caller's choosing (fetch does not let one set it). */
function postWithHost(path: string, host: string, body: unknown, token?: string): Promise<Res> {
  const u = new URL(gw.url);
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path, method: 'POST', headers: { host, 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...(token ? { authorization: `Bearer ${token}` } : {}) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode!, headers: new Headers(res.headers as Record<string, string>), body: parsed, text });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

before(async () => {
  [gh, stripe] = await Promise.all([startGitHubStub(), startStripeStub({ webhookSecret: 'whsec_public_url' })]);
  gw = await startGateway({
    env: {
      OAUTH_A_CLIENT_ID: gh.clientId,
      OAUTH_A_CLIENT_SECRET: gh.clientSecret,
      OAUTH_A_AUTHORIZE_URL: gh.authorizeUrl,
      OAUTH_A_TOKEN_URL: gh.tokenUrl,
      OAUTH_A_API_URL: gh.apiBase,
      PAYMENT_A_SECRET_KEY: stripe.apiKey,
      PAYMENT_A_WEBHOOK_SECRET: 'whsec_public_url',
      PAYMENT_A_API_BASE: stripe.origin,
    },
  });
  admin = client(gw.url, gw.adminKey);
  assert.equal((await admin.post('/v1/cities/create', { name: 'Pub', city_id: 'pub' })).status, 200);
  alice = (await admin.post('/v1/cities/tokens/apply', { city_id: 'pub', user_id: 'alice' })).body.user_token;
});
after(async () => {
  await gw?.stop();
  await Promise.all([gh?.close(), stripe?.close()]);
});

const redirectUriOf = (url: string) => new URL(url).searchParams.get('redirect_uri');
const payments = async () => { const r = await client(gw.url, alice).get('/v1/payment/payments/me'); assert.equal(r.status, 200, r.text); return r.body; };

describe('public URL: never from the Host header', () => {
  test('no GATEWAY_CITY_BASE_URL, Host evil.example: OAuth start and checkout answer 503 public_url_not_configured, nothing written', async () => {
    const before = JSON.stringify(await payments());
    const sessions = stripe.sessions.size;
    for (const body of [{ city_id: 'pub', provider: 'github' }, { city_id: 'pub', provider: 'github', return_to: 'http://evil.example/' }]) {
      const r = await postWithHost('/v1/accounts/oauth/start', 'evil.example', body);
      assert.equal(r.status, 503, r.text);
      assert.equal(errorOf(r).code, 'public_url_not_configured');
      assert.match(errorOf(r).message, /GATEWAY_CITY_BASE_URL/);
      assert.doesNotMatch(r.text, /evil\.example/);
    }
    const c = await postWithHost('/v1/payment/checkout', 'evil.example', { method: 'a', credits: 1_000_000 }, alice);
    assert.equal(c.status, 503, c.text);
    assert.equal(errorOf(c).code, 'public_url_not_configured');
    assert.equal(stripe.sessions.size, sessions, 'no checkout session at Stripe');
    assert.equal(JSON.stringify(await payments()), before, 'no payment row');
    // the gateway's own loopback origin still works in development
    const own = await postWithHost('/v1/accounts/oauth/start', new URL(gw.url).host, { city_id: 'pub', provider: 'github' });
    assert.equal(own.status, 200, own.text);
    assert.equal(redirectUriOf(own.body.url), `${gw.url}/v1/accounts/oauth/callback`);
  });

  test('with GATEWAY_CITY_BASE_URL, a spoofed Host changes neither the redirect_uri, the allowed return_to nor the Stripe pages', async () => {
    assert.equal((await admin.post('/v1/env/upsert', { key: 'GATEWAY_CITY_BASE_URL', value: 'https://gateway.example.com' })).status, 200);
    try {
      const r = await postWithHost('/v1/accounts/oauth/start', 'evil.example', { city_id: 'pub', provider: 'github' });
      assert.equal(r.status, 200, r.text);
      assert.equal(redirectUriOf(r.body.url), 'https://gateway.example.com/v1/accounts/oauth/callback');
      const back = await postWithHost('/v1/accounts/oauth/start', 'evil.example', { city_id: 'pub', provider: 'github', return_to: 'http://evil.example/done' });
      assert.equal(back.status, 400, back.text);
      assert.equal(errorOf(back).code, 'return_to_not_allowed');
      const c = await postWithHost('/v1/payment/checkout', 'evil.example', { method: 'a', credits: 1_000_000 }, alice);
      assert.equal(c.status, 200, c.text);
      const session = [...stripe.sessions.values()].at(-1)!;
      assert.match(session.success_url!, /^https:\/\/gateway\.example\.com\/v1\/payment\/redirect\/success\?/);
      assert.match(session.cancel_url!, /^https:\/\/gateway\.example\.com\//);
    } finally {
      await admin.post('/v1/env/remove', { key: 'GATEWAY_CITY_BASE_URL' });
    }
  });
});

describe('local login is local', () => {
  test('LOCAL_LOGIN unset: on for a loopback listener only; LOCAL_LOGIN=true: on anywhere, with a boot warning', () => {
    const cases: [Record<string, string>, boolean, boolean][] = [
      [{}, true, false],
      [{ HOST: '127.0.0.1' }, true, false],
      [{ HOST: '::1' }, true, false],
      [{ HOST: 'localhost' }, true, false],
      [{ HOST: '0.0.0.0' }, false, false],
      [{ HOST: '::' }, false, false],
      [{ HOST: '192.168.1.20' }, false, false],
      [{ HOST: '0.0.0.0', LOCAL_LOGIN: 'true' }, true, true],
      [{ HOST: '127.0.0.1', LOCAL_LOGIN: 'false' }, false, false],
    ];
    for (const [env, on, warns] of cases) {
      const c = readNodeConfig({ DATABASE_PATH: '/tmp/unused.sqlite', ...env });
      assert.equal(c.localLogin, on, JSON.stringify(env));
      assert.equal(localLoginWarning(c) !== null, warns, JSON.stringify(env));
    }
    assert.equal(isLoopbackHost('127.8.9.10'), true);
    assert.equal(isLoopbackHost('10.0.0.1'), false);
  });
});
