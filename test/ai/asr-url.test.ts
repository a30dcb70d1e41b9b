// asr with the audio given by URL (https): the hold, the 402 before anything is fetched, the
// estimate from the bytes actually fetched, and an unreadable URL. The audio is served over real
// HTTPS on 127.0.0.1 with a certificate made for this test (trusted by the gateway through
// NODE_EXTRA_CA_CERTS) under the name `audio.citygate.test`, which the gateway resolves through a
// DNS stub (AI_FETCH_DNS_SERVERS). A caller's URL may not reach loopback: this gateway lets
// 127.0.0.1 through on purpose (AI_FETCH_ALLOW_PRIVATE), as an on-premise setup would.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { tempDir } from '../helpers/gateway.ts';
import { client, errorOf } from '../helpers/http.ts';
import { until } from '../helpers/wait.ts';
import { startDnsStub, type DnsStub } from '../stubs/dns.ts';
import { RICH_USERS, startAiWorld, userWithCredits, type AiWorld } from './setup.ts';

const HOST = 'audio.citygate.test';
let dns: DnsStub;

const SPEECH = new Uint8Array(64_000).fill(7); // 2 s at the stub's 32,000 bytes a second
const fetched: string[] = [];
let audioServer: Server;
let audioBase: string;
let w: AiWorld;

before(async () => {
  const dir = tempDir('citygate-asr-url-');
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', `/CN=${HOST}`, '-addext', `subjectAltName=DNS:${HOST}`, '-keyout', key, '-out', cert], { stdio: 'ignore' });
  audioServer = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    fetched.push(req.url ?? '');
    if (req.url === '/speech.wav') {
      res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': SPEECH.byteLength });
      res.end(SPEECH);
    } else if (req.url === '/huge.wav') {
      res.writeHead(200, { 'content-type': 'audio/wav' }); // no content-length: the size shows only while reading
      const chunk = new Uint8Array(1024 * 1024);
      let sent = 0;
      const more = () => {
        while (sent < 26 && !res.destroyed) {
          sent++;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not here');
    }
  });
  await new Promise<void>((r) => audioServer.listen(0, '127.0.0.1', r));
  dns = await startDnsStub({ [HOST]: ['127.0.0.1'] });
  audioBase = `https://${HOST}:${(audioServer.address() as AddressInfo).port}`;
  w = await startAiWorld({ env: { ...RICH_USERS, OPENAI_API_KEY: 'sk-stub', NODE_EXTRA_CA_CERTS: cert, AI_FETCH_DNS_SERVERS: dns.server, AI_FETCH_ALLOW_PRIVATE: '127.0.0.1/32' } });
});
after(async () => {
  await w?.close();
  await dns?.close();
  audioServer?.closeAllConnections();
  await new Promise((r) => (audioServer ? audioServer.close(r) : r(null)));
});

/** A user whose balance is exactly `credits`. */
const userWith = (userId: string, credits: number) => userWithCredits(w, 'asr-url', userId, credits);
const transcriptions = () => w.stub.requests.filter((r) => r.path === '/v1/audio/transcriptions').length;
async function onlyRecord(u: ReturnType<typeof client>) {
  let items: any[] = [];
  await until('the usage record', async () => (items = (await u.get('/v1/usage/me')).body.items).length > 0, 30_000);
  assert.equal(items.length, 1, JSON.stringify(items));
  return items[0];
}

// whisper-1: 100 credits a second. The URL's hold: 25 MB at 1 s per 1,000 bytes = 26,215 s.
const URL_HOLD = Math.ceil((25 * 1024 * 1024) / 1000) * 100;

describe('asr by URL', () => {
  test('held for the largest audio accepted (25 MB): short of it → 402 before the audio is fetched or the upstream called', async () => {
    const poor = await userWith('poor', URL_HOLD - 1);
    const [hits, calls] = [fetched.length, transcriptions()];
    const no = await poor.u.post('/v1/ai/asr', { model: 'openai/whisper-1', url: `${audioBase}/speech.wav` });
    assert.equal(no.status, 402, no.text);
    assert.equal(errorOf(no).code, 'insufficient_credits');
    assert.match(errorOf(no).message, new RegExp(`up to ${URL_HOLD} credits`));
    assert.equal(fetched.length, hits, 'the audio was not fetched');
    assert.equal(transcriptions(), calls, 'the upstream was not called');
    assert.equal(await poor.balance(), URL_HOLD - 1);

    const enough = await userWith('enough', URL_HOLD);
    const ok = await enough.u.post('/v1/ai/asr', { model: 'openai/whisper-1', url: `${audioBase}/speech.wav` });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.text, 'stub transcript of 64000 bytes');
    assert.equal(fetched.length, hits + 1, 'fetched once');
    assert.equal(transcriptions(), calls + 1);
    await until('the charge', async () => (await enough.balance()) === URL_HOLD - 200, 30_000);
    const rec = await onlyRecord(enough.u);
    assert.deepEqual([rec.status, rec.estimated, rec.seconds, rec.credits], ['ok', false, 2, 200]);
  });

  test('no duration from the upstream: the estimate is 1 s per 16,000 bytes of the audio fetched, not of the largest accepted', async () => {
    const p = await userWith('estimated', URL_HOLD);
    const r = await p.u.post('/v1/ai/asr', { model: 'asr-no-duration', url: `${audioBase}/speech.wav` });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.duration_seconds, undefined);
    // 64,000 bytes / 16,000 = 4 s at 100 credits
    await until('the estimate is charged', async () => (await p.balance()) === URL_HOLD - 400, 30_000);
    const rec = await onlyRecord(p.u);
    assert.deepEqual([rec.status, rec.estimated, rec.seconds, rec.credits], ['ok', true, 4, 400]);
  });

  test('an unreadable URL is 400 and a too large audio 413, before the upstream; the hold is returned', async () => {
    const p = await userWith('unlucky', URL_HOLD);
    const calls = transcriptions();
    const missing = await p.u.post('/v1/ai/asr', { model: 'openai/whisper-1', url: `${audioBase}/missing.wav` });
    assert.equal(missing.status, 400, missing.text);
    assert.deepEqual([errorOf(missing).code, errorOf(missing).param], ['audio_unreadable', 'url']);
    assert.match(errorOf(missing).message, /404/);
    const huge = await p.u.post('/v1/ai/asr', { model: 'openai/whisper-1', url: `${audioBase}/huge.wav` });
    assert.equal(huge.status, 413, huge.text);
    assert.deepEqual([errorOf(huge).code, errorOf(huge).param], ['audio_too_large', 'url']);
    assert.equal(transcriptions(), calls, 'the upstream was not called');
    await until('both holds returned', async () => (await p.balance()) === URL_HOLD, 30_000);
    let items: any[] = [];
    await until('two usage records', async () => (items = (await p.u.get('/v1/usage/me')).body.items).length >= 2, 30_000);
    assert.deepEqual(items.map((x) => [x.status, x.error_code, x.credits]).sort(), [['error', 'audio_too_large', 0], ['error', 'audio_unreadable', 0]]);
  });
});
