// What survives a restart, and what concurrent first boots converge on.
import assert from 'node:assert/strict';
import { sqlAll, sqlGet } from '../helpers/sql.ts';
import { join } from 'node:path';
import { test } from 'node:test';
import { readAdminKey, startGateway, startGateways, tempDir } from '../helpers/gateway.ts';
import { client } from '../helpers/http.ts';
import { ON_POSTGRES } from '../helpers/postgres.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { openNodeSqlite } from '../../src/db/dialects/node-sqlite.ts';

test('the admin key read by plain SQL is the one that works, and the first boot prints it once', async () => {
  const gw = await startGateway();
  try {
    const { value } = (await sqlGet<{ value: string }>(gw, `SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`))!;
    assert.match(value, /^cg_admin_[A-Za-z0-9_-]{40,}$/);
    assert.equal((await client(gw.url, value).get('/v1/cities/list')).status, 200);
    assert.ok(gw.stderr().includes(value), 'printed on first boot');
    assert.match(gw.stderr(), /citygate admin-key/);
  } finally {
    await gw.stop();
  }
});

test('after a restart: cities, env entries and issued tokens work, the admin key is unchanged and not printed again', async () => {
  let gw = await startGateway();
  const admin = client(gw.url, gw.adminKey);
  await admin.post('/v1/cities/create', { name: 'Keep', city_id: 'keep' });
  await admin.post('/v1/env/upsert', { key: 'KEEP_ME', value: 'kept' });
  const userToken = (await admin.post('/v1/cities/tokens/apply', { city_id: 'keep', user_id: 'u1' })).body.user_token;
  const bureauToken = (await admin.post('/v1/bureaus/create', { city_id: 'keep', name: 'b' })).body.bureau_token;
  const keyBefore = gw.adminKey;
  assert.equal(await gw.stop(), 0, 'graceful stop exits 0');

  gw = await gw.restart();
  try {
    assert.equal(gw.adminKey, keyBefore);
    assert.equal(gw.stderr().includes(keyBefore), false, 'not printed again');
    const a = client(gw.url, keyBefore);
    assert.deepEqual((await a.get('/v1/cities/list')).body.items.map((c: { city_id: string }) => c.city_id), ['keep']);
    const env = (await a.get('/v1/env/list')).body.items.find((e: { key: string }) => e.key === 'KEEP_ME');
    assert.equal(env.value, 'kept');
    assert.equal((await client(gw.url, userToken).get('/v1/cities/current')).status, 200);
    assert.equal((await client(gw.url, bureauToken).get('/v1/cities/list')).status, 200);
  } finally {
    await gw.stop();
  }
});

test('GATEWAY_ADMIN_SECRET_KEY from the process environment seeds the first boot', async () => {
  const key = 'cg_admin_from_the_environment_0123456789';
  const gw = await startGateway({ env: { GATEWAY_ADMIN_SECRET_KEY: key } });
  try {
    assert.equal(gw.adminKey, key);
    assert.equal(gw.stderr().includes(key), false, 'a key the operator chose is not echoed');
    assert.equal((await client(gw.url, key).get('/v1/env/list')).status, 200);
  } finally {
    await gw.stop();
  }
});

test('four gateways booted at once on one new database: one admin key, one active signing key', async () => {
  const dir = tempDir();
  const gws = await startGateways(4, { dir, freshDatabase: true });
  try {
    const keys = await sqlAll(gws[0], `SELECT value FROM env WHERE key = 'GATEWAY_ADMIN_SECRET_KEY'`);
    const active = await sqlAll(gws[0], `SELECT kid FROM signing_keys WHERE status = 'active'`);
    const migrations = await sqlAll(gws[0], `SELECT name FROM _migrations`);
    assert.equal(keys.length, 1);
    assert.equal(active.length, 1);
    assert.equal(new Set(migrations.map((m) => (m as { name: string }).name)).size, migrations.length);
    const adminKey = await readAdminKey(gws[0]);
    const printed = gws.filter((g) => g.stderr().includes(adminKey)).length;
    assert.equal(printed, 1, 'exactly one process generated and printed the key');
    // A token issued by one process works on every other.
    await client(gws[0].url, adminKey).post('/v1/cities/create', { name: 'Shared', city_id: 'shared' });
    const t = (await client(gws[1].url, adminKey).post('/v1/cities/tokens/apply', { city_id: 'shared', user_id: 'u' })).body.user_token;
    for (const g of gws) assert.equal((await client(g.url, t).get('/v1/cities/current')).status, 200);
    const jwks = await Promise.all(gws.map(async (g) => JSON.stringify((await client(g.url).get('/.well-known/jwks.json')).body)));
    assert.equal(new Set(jwks).size, 1);
  } finally {
    await Promise.all(gws.map((g) => g.stop()));
  }
});

const SQLITE_ONLY = { skip: ON_POSTGRES && 'a SQLite file only' };

/**
 * Another process holding the write lock of the SQLite file at `path` (after running `before`,
 * and `inside` its transaction) for `ms`, or until `release(holder)` when `ms` is null; resolves
 * once it holds it. Tests that need the lock held across another event wait for that event and
 * release it then: a fixed hold is too short on a loaded machine.
 */
async function holdWriteLock(path: string, ms: number | null, { before = [], inside = [] }: { before?: string[]; inside?: string[] } = {}): Promise<ChildProcess> {
  const holder = spawn(process.execPath, ['--input-type=module', '-e', `
    import { DatabaseSync } from 'node:sqlite';
    const db = new DatabaseSync(${JSON.stringify(path)});
    for (const s of ${JSON.stringify(before)}) db.exec(s);
    db.exec('BEGIN IMMEDIATE');
    for (const s of ${JSON.stringify(inside)}) db.exec(s);
    process.stdout.write('held\\n');
    const commit = () => { db.exec('COMMIT'); db.close(); process.exit(0); };
    if (${ms === null}) process.stdin.once('data', commit); else setTimeout(commit, ${ms ?? 0});
  `], { stdio: ['pipe', 'pipe', 'inherit'] });
  await once(holder.stdout!, 'data');
  return holder;
}

/** Lets a holdWriteLock(path, null) process commit; resolves once it has exited. */
async function release(holder: ChildProcess): Promise<void> {
  if (holder.exitCode !== null) return;
  const exited = once(holder, 'exit');
  holder.stdin!.end('commit\n');
  await exited;
}

test('a process that opens a new SQLite file while another holds its first write lock waits for it (no "database is locked")', SQLITE_ONLY, async () => {
  // The race behind four gateways booting at once: the other process has written the new
  // file's first page (auto_vacuum) and holds the write lock; switching to WAL then fails at
  // once with SQLITE_BUSY, without the busy timeout, unless the opener tries again.
  const path = join(tempDir(), 'new.sqlite');
  const holder = await holdWriteLock(path, 400, { before: ['PRAGMA auto_vacuum = INCREMENTAL'], inside: ['CREATE TABLE first_boot (x)'] });
  const started = Date.now();
  const db = openNodeSqlite(path);
  try {
    assert.ok(Date.now() - started >= 100, 'it waited for the other process');
    assert.equal((await sqlGet<{ journal_mode: string }>({ dbPath: path }, 'PRAGMA journal_mode'))?.journal_mode, 'wal');
    assert.equal((await sqlGet<{ auto_vacuum: number }>({ dbPath: path }, 'PRAGMA auto_vacuum'))?.auto_vacuum, 2, 'incremental');
  } finally {
    await db.close();
    await once(holder, 'exit');
  }
});

test('a SQLite file whose write lock another process holds past the busy timeout (SQLITE_BUSY_TIMEOUT_MS): a write answers 503 database_unavailable, then works once it is released', SQLITE_ONLY, async () => {
  const gw = await startGateway({ env: { SQLITE_BUSY_TIMEOUT_MS: '1000' } });
  const admin = client(gw.url, gw.adminKey);
  const holder = await holdWriteLock(gw.dbPath, null);
  try {
    const locked = await admin.post('/v1/cities/create', { name: 'Locked', city_id: 'locked' });
    assert.equal(locked.status, 503, JSON.stringify(locked.body));
    assert.equal(locked.body.error.code, 'database_unavailable');
    assert.ok(Number(locked.headers.get('retry-after')) > 0);
    await release(holder);
    assert.equal((await admin.post('/v1/cities/create', { name: 'Locked', city_id: 'locked' })).status, 200);
    assert.deepEqual((await admin.get('/v1/cities/list')).body.items.map((c: { city_id: string }) => c.city_id), ['locked']);
  } finally {
    holder.kill();
    await gw.stop();
  }
});

test('a gateway that boots while another process holds the SQLite write lock past the busy timeout waits for it, then serves', SQLITE_ONLY, async () => {
  let gw = await startGateway({ env: { SQLITE_BUSY_TIMEOUT_MS: '1000' } });
  const admin = gw.adminKey;
  assert.equal(await gw.stop(), 0);
  const holder = await holdWriteLock(gw.dbPath, null);
  try {
    // the lock is released once the booting gateway has said it waits for it
    let said = '';
    gw = await startGateway({
      dir: gw.dir,
      env: { SQLITE_BUSY_TIMEOUT_MS: '1000' },
      onSpawn: (child) =>
        child.stderr!.on('data', (d: Buffer) => {
          said += d;
          if (/database not reachable \(database is locked\); attempt 1/.test(said)) void release(holder);
        }),
    });
    assert.match(gw.stderr(), /database not reachable \(database is locked\); attempt 1/);
    assert.equal((await client(gw.url, admin).get('/v1/cities/list')).status, 200);
  } finally {
    holder.kill();
    await gw.stop();
  }
});

test('`citygate admin-key` reads the key from DATABASE_PATH (or DATABASE_URL); a pause on one process reaches the others', async () => {
  const dir = tempDir();
  const [a, b] = await startGateways(2, { dir });
  try {
    const { execFileSync } = await import('node:child_process');
    const printed = execFileSync(process.execPath, ['src/cli/main.ts', 'admin-key'], {
      env: { ...process.env, DATABASE_PATH: a.dbPath, DATABASE_URL: a.databaseUrl ?? '' },
      encoding: 'utf8',
    }).trim();
    assert.equal(printed, a.adminKey);
    const admin = client(a.url, a.adminKey);
    await admin.post('/v1/cities/create', { name: 'P', city_id: 'p' });
    const t = client(b.url, (await admin.post('/v1/cities/tokens/apply', { city_id: 'p', user_id: 'u' })).body.user_token);
    assert.equal((await t.get('/v1/cities/current')).status, 200);
    await admin.post('/v1/cities/pause', { city_id: 'p' });
    const deadline = Date.now() + 6000;
    let status = 200;
    while (Date.now() < deadline && status !== 403) {
      status = (await t.get('/v1/cities/current')).status;
      if (status !== 403) await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(status, 403, 'the other process sees the pause within a few seconds');
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});
