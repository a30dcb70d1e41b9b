// `citygate usage` against a real Node server: the summary (default) and list reports, their
// filters, the table and --json, and clean errors.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { runCli } from '../helpers/cli.ts';
import { startGateway, tempDir, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { startOpenAIStub, type OpenAIStub } from '../stubs/openai.ts';
import { awayFromMidnight, until } from '../helpers/wait.ts';

let stub: OpenAIStub;
let gw: TestGateway;
let env: Record<string, string>;
/** The UTC day of the records, read once from them (not from the clock: a run may cross midnight). */
let today: string;

before(async () => {
  await awayFromMidnight();
  stub = await startOpenAIStub();
  gw = await startGateway({
    env: {
      TEXTPROVIDER_API_KEY: 'sk-stub',
      TEXTPROVIDER_BASE_URL: stub.url,
      TEXTPROVIDER_MODELS: 'stub-model,stub-500',
      MODEL_PRICES: JSON.stringify({ 'stub-model': { per_request: 1000 } }),
      USAGE_FLUSH_MS: '10',
    },
  });
  const admin = client(gw.url, gw.adminKey);
  for (const [city, user] of [['cli-a', 'alice'], ['cli-b', 'bob']]) {
    await admin.post('/v1/cities/create', { name: city, city_id: city });
    const token = (await admin.post('/v1/cities/tokens/apply', { city_id: city, user_id: user })).body.user_token;
    await admin.post('/v1/balance/adjust', { city_id: city, user_id: user, credits: 10_000, reason: 'fund', idempotency_key: `fund-${user}` });
    for (const model of city === 'cli-a' ? ['stub-model', 'stub-model', 'stub-500'] : ['stub-model']) {
      await call(gw.url, 'POST', '/v1/ai/chat/completions', { token, body: { model, messages: [{ role: 'user', content: 'hi' }] } });
    }
  }
  // Registered nowhere: the command reaches the gateway by --gateway URL and CITYGATE_ADMIN_KEY.
  env = { CITYGATE_CONFIG: join(tempDir('citygate-cli-'), 'config.json'), CITYGATE_ADMIN_KEY: gw.adminKey };
  // The records are written in the background: wait for all four, or fail here.
  const admin2 = client(gw.url, gw.adminKey);
  await until('the four usage records', async () => (await admin2.get('/v1/usage/summary')).body.totals?.calls === 4, 60_000);
  const days = new Set((await admin2.get('/v1/usage/list?limit=10')).body.items.map((x: { created_at: string }) => x.created_at.slice(0, 10)));
  assert.equal(days.size, 1, 'the records fall on one UTC day');
  [today] = days as Set<string>;
});
after(async () => {
  await gw?.stop();
  await stub?.close();
});

const usage = (...args: string[]) => runCli(['usage', ...args, '--gateway', gw.url], { env });

test('citygate usage: the summary per day × city × model, with totals', async () => {
  const r = await usage();
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^usage from \d{4}-\d{2}-\d{2} to \d{4}-\d{2}-\d{2} \(UTC days\)$/m);
  assert.match(r.stdout, /^DAY\s+CITY\s+MODEL\s+CALLS\s+ERRORS\s+INPUT\s+OUTPUT\s+CREDITS\s+USD$/m);
  assert.match(r.stdout, new RegExp(`^${today}\\s+cli-a\\s+stub-500\\s+1\\s+1\\s+`, 'm'));
  assert.match(r.stdout, new RegExp(`^${today}\\s+cli-a\\s+stub-model\\s+2\\s+0\\s+\\d+\\s+\\d+\\s+2,000\\s+\\$0\\.002000$`, 'm'));
  assert.match(r.stdout, new RegExp(`^${today}\\s+cli-b\\s+stub-model\\s+1\\s+0\\s+`, 'm'));
  assert.match(r.stdout, /^total: 4 calls, 1 errors, .* 3,000 credits \(\$0\.003000\)$/m);

  const one = await usage('summary', '--city', 'cli-b', '--from', today, '--to', today);
  assert.equal(one.code, 0, one.stderr);
  assert.match(one.stdout, new RegExp(`^usage from ${today} to ${today} \\(UTC days\\), city cli-b$`, 'm'));
  assert.ok(!one.stdout.includes('cli-a'));
  const json = JSON.parse((await usage('--json', '--model', 'stub-500')).stdout);
  assert.deepEqual(json.items.map((x: { model: string; calls: number }) => [x.model, x.calls]), [['stub-500', 1]]);
  assert.equal(json.totals.calls, 1);
});

test('citygate usage list: records newest first, filtered by city, user, model and status', async () => {
  const r = await usage('list', '--city', 'cli-a');
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^TIME\s+CITY\s+USER\s+MODEL\s+MODE\s+STATUS\s+INPUT\s+OUTPUT\s+CREDITS\s+MS$/m);
  const lines = r.stdout.trim().split('\n').slice(1);
  assert.equal(lines.length, 3);
  assert.ok(lines.every((l) => /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z\s+cli-a\s+alice\s+/.test(l)), r.stdout);
  const errors = await usage('list', '--user', 'alice', '--city', 'cli-a', '--status', 'error', '--json');
  const items = JSON.parse(errors.stdout).items;
  assert.equal(items.length, 1);
  assert.equal(items[0].model, 'stub-500');
  const paged = await usage('list', '--limit', '2');
  assert.match(paged.stdout, /^more: citygate usage list … --cursor \d+_\d+$/m);
  const byModel = JSON.parse((await usage('list', '--model', 'stub-model', '--from', today, '--json')).stdout);
  assert.equal(byModel.items.length, 3);
});

test('citygate usage: wrong reports, list-only filters on the summary and the gateway’s 400s fail cleanly', async () => {
  const unknown = await usage('frobnicate');
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /unknown usage report 'frobnicate'/);
  const misplaced = await usage('--user', 'alice');
  assert.equal(misplaced.code, 1);
  assert.match(misplaced.stderr, /--user filters records: use `citygate usage list`/);
  const bad = await usage('summary', '--from', 'yesterday');
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^citygate usage: 400 [a-z_]+: /m);
  assert.ok(!bad.stderr.includes('    at '), 'no stack trace');
});
