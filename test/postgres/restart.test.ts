// PostgreSQL restarted under load (a failover, a minor-version upgrade): two replicas, 32
// keep-alive connections of charged chat/completions for six users plus eight balance readers;
// the server is stopped for 3 s and started again. No process dies; every call gets 200 or 503
// (never 500); both replicas serve again within 2 s of the server accepting connections; the
// log says the outage once each way; and the books are exact. And a boot while PostgreSQL is
// down: the gateway waits for it (DATABASE_CONNECT_TIMEOUT_S) and comes up without a restart.
//
// These tests stop and start their database, so they run on a private PostgreSQL server of
// their own (the same installed server binaries, own cluster and port: private-postgres.ts),
// never the shared local server the other PostgreSQL tests use.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { test } from 'node:test';
import { startGateway, startGateways, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { assertExactBooks, balanceReaders, chargedLoad } from '../helpers/load.ts';
import { privatePgSkipReason, startPrivatePostgres } from '../helpers/private-postgres.ts';
import { sqlAll } from '../helpers/sql.ts';
import { sleep, until } from '../helpers/wait.ts';
import { startOpenAIStub } from '../stubs/openai.ts';

const skip = privatePgSkipReason();
const PRICES = { 'stub-model': { input_per_mtok: 1_000_000, output_per_mtok: 2_000_000 } };

test('PostgreSQL stopped for 3 s under load: no process exits, 200 or 503 only, back within 2 s, exact books', { skip }, async (t) => {
  const pg = await startPrivatePostgres();
  pg.createDatabase('citygate');
  const stub = await startOpenAIStub();
  let gws: TestGateway[] = [];
  try {
    gws = await startGateways(2, {
      env: {
        DATABASE_URL: pg.urlOf('citygate'),
        TEXTPROVIDER_API_KEY: 'sk-stub',
        TEXTPROVIDER_BASE_URL: stub.url,
        TEXTPROVIDER_MODELS: 'stub-model',
        MODEL_PRICES: JSON.stringify(PRICES),
        BALANCE_INITIAL_CREDITS: '100000000',
      },
    });
    const urls = gws.map((g) => g.url);
    const admin = client(urls[0], gws[0].adminKey);
    await admin.post('/v1/cities/create', { name: 'R', city_id: 'restart' });
    const users = ['u0', 'u1', 'u2', 'u3', 'u4', 'u5'];
    const tokens: string[] = [];
    for (const u of users) tokens.push((await admin.post('/v1/cities/tokens/apply', { city_id: 'restart', user_id: u })).body.user_token);

    const load = chargedLoad(urls, tokens, 32, { model: 'stub-model', max_tokens: 5, messages: [{ role: 'user', content: 'load test words' }] });
    const readers = balanceReaders(urls, tokens, 8);
    await until('load running', () => load.counts.ok.reduce((a, b) => a + b, 0) >= 300, 30_000);

    pg.stop();
    await sleep(1500);
    for (const u of urls) {
      const r = await call(u, 'GET', '/health/ready');
      assert.equal(r.status, 503, 'not ready while the database is down');
      assert.equal(r.body.error.code, 'database_unavailable');
      assert.equal((await call(u, 'GET', '/health/live')).status, 200, 'but alive');
    }
    const down = await call(urls[0], 'GET', '/v1/cities/list', { token: gws[0].adminKey });
    assert.equal(down.status, 503, 'a call that needs the database');
    assert.equal(down.body.error.code, 'database_unavailable');
    assert.ok(Number(down.headers.get('retry-after')) > 0, 'with Retry-After');
    await sleep(1500);

    pg.start();
    const back = Date.now();
    await Promise.all(
      gws.map((g) => until('the replica serves calls that need the database', async () => (await call(g.url, 'GET', '/v1/cities/list', { token: g.adminKey })).status === 200, 10_000)),
    );
    const returned = Date.now() - back;
    assert.ok(returned < 2000, `both replicas served again ${returned} ms after PostgreSQL accepted connections`);
    for (const u of urls) assert.equal((await call(u, 'GET', '/health/ready')).status, 200, 'ready again');
    await sleep(1500);
    const counts = await load.stop();
    await readers.stop();

    for (const g of gws) assert.equal(g.child.exitCode, null, `no replica exited:\n${g.stderr().slice(-2000)}`);
    const statuses = [...counts.statuses.keys(), ...readers.statuses.keys()].sort();
    assert.ok(statuses.every((s) => s === 200 || s === 503), `only 200 and 503: ${JSON.stringify([...counts.statuses, ...readers.statuses])}`);
    assert.ok((counts.statuses.get(503) ?? 0) + (readers.statuses.get(503) ?? 0) > 0, 'the outage was seen');
    for (const g of gws) {
      const log = g.stdout();
      assert.equal(log.match(/"database unavailable/g)?.length, 1, 'the outage is logged once when it starts');
      assert.match(log, /"database available again".*"refused":\d+/, 'and once when it ends, with the count of refused calls');
      assert.doesNotMatch(log, /unhandled error/, 'no stack per request');
    }

    // Settled while both still run: every record written, every lease back after its idle time.
    const target = { dbPath: '', databaseUrl: pg.urlOf('citygate') };
    await until('the books settle', async () => {
      try {
        await assertExactBooks(target, 'restart', users, counts.ok);
        return true;
      } catch {
        return false;
      }
    }, 20_000).catch(() => {});
    await assertExactBooks(target, 'restart', users, counts.ok);
    if (process.env.DUMP_LOGS) for (const g of gws) console.log(g.stdout().split("\n").filter((l) => !l.includes('"msg":"request"')).join("\n"));
    for (const g of gws) assert.equal(await g.stop(), 0);
    const books = await assertExactBooks(target, 'restart', users, counts.ok);
    assert.ok(books.records >= 300);
    t.diagnostic(`served again ${returned} ms after PostgreSQL accepted connections; chat answers ${JSON.stringify([...counts.statuses])}, balance reads ${JSON.stringify([...readers.statuses])}; ${books.records} ok records, ${books.credits} credits = Σ charges`);
  } finally {
    for (const g of gws) await g.stop('SIGKILL');
    await stub.close();
    pg.remove();
  }
});

test('boot with PostgreSQL down: the gateway (one process, and GATEWAY_WORKERS=2) waits and comes up once it is started 5 s later', { skip }, async () => {
  const pg = await startPrivatePostgres();
  pg.createDatabase('citygate');
  pg.stop();
  const env = { DATABASE_URL: pg.urlOf('citygate'), DATABASE_CONNECT_TIMEOUT_S: '60' };
  const waiting: string[] = ['', ''];
  const watch = (i: number) => (child: ChildProcess) => child.stderr!.on('data', (d: Buffer) => (waiting[i] += d.toString()));
  const started = Promise.all([startGateway({ env, onSpawn: watch(0) }), startGateway({ env: { ...env, GATEWAY_WORKERS: '2' }, onSpawn: watch(1) })]);
  let gws: TestGateway[] = [];
  try {
    // both are up and waiting for the database (a loaded machine may take a while to boot them)
    await until('both gateways wait for the database', () => waiting.every((e) => /database not reachable/.test(e)), 60_000);
    await sleep(5000);
    pg.start();
    gws = await started;
    for (const g of gws) {
      assert.equal((await call(g.url, 'GET', '/health/ready')).status, 200);
      assert.match(g.stderr(), /database not reachable .*attempt 1/, 'a log line per attempt');
      assert.doesNotMatch(g.stderr(), /worker .* exited/, 'the primary waited, no worker was respawned');
    }
    const rows = await sqlAll<{ n: number }>({ dbPath: '', databaseUrl: pg.urlOf('citygate') }, 'SELECT COUNT(*) AS n FROM env');
    assert.ok(Number(rows[0].n) > 0, 'migrated and initialized');
  } finally {
    for (const g of await started.catch(() => gws)) await g.stop();
    pg.remove();
  }
});
