// Webhooks on two replicas of one PostgreSQL database (issue 28): both replicas' runners poll
// the same outbox; every event reaches the endpoint, and the number of duplicate deliveries is
// measured (each message is claimed by one UPDATE, so two runners never send it at once).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { startGateways, tempDir } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { pgSkipReason } from '../helpers/postgres.ts';
import { sqlGet } from '../helpers/sql.ts';
import { until } from '../helpers/wait.ts';
import { startReceiver } from '../stubs/webhook-receiver.ts';

const skip = await pgSkipReason();

test('two replicas deliver each event once per endpoint; duplicates measured', { skip, timeout: 180_000 }, async () => {
  const rx = await startReceiver();
  const gws = await startGateways(2, { dir: tempDir('citygate-webhooks-'), postgres: true, env: { AI_FETCH_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_MS: '50', WEBHOOK_RETRY_BASE_MS: '100' } });
  try {
    const [a, b] = gws.map((g) => client(g.url, g.adminKey));
    assert.equal((await a.post('/v1/cities/create', { city_id: 'rep', name: 'rep' })).status, 200);
    const ep = await a.post('/v1/webhooks/create', { city_id: 'rep', url: rx.url, events: ['user.created', 'balance.low', 'city.paused', 'city.activated'] });
    assert.equal(ep.status, 200, ep.text);
    const other = await b.post('/v1/webhooks/create', { city_id: 'rep', url: `${rx.url}?second`, events: ['balance.low'] });
    assert.equal(other.status, 200, other.text);
    assert.equal((await b.post('/v1/webhooks/alerts/update', { city_id: 'rep', balance_low: 100 })).status, 200);
    rx.plan = (d) => (d.n === 1 && d.body.length % 5 === 0 ? 500 : 200); // some first deliveries fail: retries too

    // 40 users, each made on one replica and debited below the threshold on the other, at once
    const users = Array.from({ length: 40 }, (_, i) => `u${i}`);
    await Promise.all(
      users.map(async (u, i) => {
        const [x, y] = i % 2 ? [a, b] : [b, a];
        assert.equal((await x.post('/v1/cities/tokens/apply', { city_id: 'rep', user_id: u })).status, 200);
        assert.equal((await y.post('/v1/balance/adjust', { city_id: 'rep', user_id: u, credits: 500, reason: 'r', idempotency_key: `${u}-up` })).status, 200);
        assert.equal((await x.post('/v1/balance/adjust', { city_id: 'rep', user_id: u, credits: -450, reason: 'r', idempotency_key: `${u}-down` })).status, 200);
      }),
    );
    for (let i = 0; i < 5; i++) {
      assert.equal((await (i % 2 ? a : b).post('/v1/cities/pause', { city_id: 'rep' })).status, 200);
      assert.equal((await (i % 2 ? b : a).post('/v1/cities/activate', { city_id: 'rep' })).status, 200);
    }

    const messages = Number((await sqlGet<{ n: number }>(gws[0], `SELECT COUNT(*) AS n FROM webhook_messages`))!.n);
    assert.equal(messages, 40 + 40 + 10 + 40, 'user.created, balance.low ×2 endpoints, 10 city events');
    const ok = () => rx.deliveries.filter((d) => d.answered === 200);
    await until('every event delivered', () => ok().length >= messages, 60_000);
    await new Promise((r) => setTimeout(r, 1500)); // anything late would be a duplicate
    const perEndpoint = (secret: string) => ok().filter((d) => {
      try {
        new Webhook(secret).verify(d.body, d.headers as Record<string, string>);
        return true;
      } catch {
        return false;
      }
    });
    const first = perEndpoint(ep.body.secret);
    const second = perEndpoint(other.body.secret);
    const dup = (ds: typeof first) => ds.length - new Set(ds.map((d) => d.headers['webhook-id'])).size;
    const duplicates = dup(first) + dup(second);
    console.log(`# 2 replicas on PostgreSQL: ${messages} messages, ${ok().length} successful deliveries, ${rx.deliveries.length - ok().length} failed attempts (planned), duplicates: ${duplicates}`);
    assert.equal(new Set(first.map((d) => d.headers['webhook-id'])).size, 90);
    assert.equal(new Set(second.map((d) => d.headers['webhook-id'])).size, 40);
    assert.equal(duplicates, 0, 'no event delivered twice to an endpoint');
    const undelivered = Number((await sqlGet<{ n: number }>(gws[0], `SELECT COUNT(*) AS n FROM webhook_messages WHERE status <> 'delivered'`))!.n);
    assert.equal(undelivered, 0);
  } finally {
    await Promise.all(gws.map((g) => g.stop()));
    await rx.close();
  }
});
