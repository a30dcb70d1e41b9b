// The accounts capability other services use in-process (gw.use('accounts')): registerUser and
// the user-created hook. In-process because the hook is code, not HTTP.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openNodeSqlite } from '../../src/db/dialects/node-sqlite.ts';
import { createGateway, type Gateway } from '../../src/kernel/gateway.ts';
import { silentLogger } from '../../src/kernel/log.ts';
import { ACCOUNTS, type AccountsCapability, type UserCreated } from '../../src/services/accounts/index.ts';
import { stockServices } from '../../src/services/index.ts';

const ADMIN = 'cg_admin_capability-test-key-0123456789';
let gw: Gateway;
const created: UserCreated[] = [];

async function call(method: string, path: string, body?: unknown, token = ADMIN) {
  const res = await gw.fetch(
    new Request(`http://gw.test${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
  return { status: res.status, body: (await res.json()) as any };
}

before(async () => {
  gw = createGateway({ db: openNodeSqlite(':memory:'), services: stockServices, processEnv: { GATEWAY_ADMIN_SECRET_KEY: ADMIN }, logger: silentLogger });
  await gw.init();
  const accounts = gw.context.use<AccountsCapability>(ACCOUNTS);
  assert.ok(accounts, 'accounts offers its capability');
  accounts.onUserCreated((u) => void created.push(u));
  accounts.onUserCreated(() => {
    throw new Error('a failing listener does not fail the login');
  });
  assert.equal((await call('POST', '/v1/cities/create', { name: 'Cap', city_id: 'cap' })).status, 200);
});
after(() => gw?.stop());

describe('accounts capability', () => {
  test('onUserCreated fires once per new user, whatever created it', async () => {
    const local = await call('POST', '/v1/accounts/login', { city_id: 'cap', user_id: 'l1' });
    assert.equal(local.status, 200);
    assert.equal((await call('POST', '/v1/accounts/login', { city_id: 'cap', user_id: 'l1' })).status, 200);
    assert.equal((await call('POST', '/v1/cities/tokens/apply', { city_id: 'cap', user_id: 't1' })).status, 200);
    assert.equal((await call('POST', '/v1/cities/tokens/apply', { city_id: 'cap', user_id: 't1' })).status, 200);
    assert.equal((await call('POST', '/v1/cities/tokens/apply', { city_id: 'cap', user_id: 'l1' })).status, 200);
    assert.deepEqual(
      created.map((u) => [u.city_id, u.user_id, u.via]),
      [
        ['cap', 'l1', 'local'],
        ['cap', 't1', 'token'],
      ],
    );
  });

  test('registerUser says whether it created the user', async () => {
    const accounts = gw.context.use<AccountsCapability>(ACCOUNTS)!;
    assert.equal(await accounts.registerUser({ city_id: 'cap', user_id: 'r1', via: 'token' }), true);
    assert.equal(await accounts.registerUser({ city_id: 'cap', user_id: 'r1', via: 'token' }), false);
    const users = await call('GET', '/v1/accounts/users?city_id=cap');
    assert.deepEqual(users.body.items.map((u: { user_id: string }) => u.user_id).sort(), ['l1', 'r1', 't1']);
  });
});
