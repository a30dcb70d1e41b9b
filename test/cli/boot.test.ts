// What a boot loads. Most of a gateway's boot is Node loading modules (~2 s of CPU on a small
// machine, paid by every start, restart, rolling deploy and worker respawn), so the packages only
// some requests need load on their first use: the MCP SDK (with ajv and zod-to-json-schema) on
// the first MCP request, arctic (OAuth) on the first OAuth login, the AI SDK on the first call it
// serves. This test boots `serve`, stops it, and reads every module the process loaded.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { startGateway } from '../helpers/gateway.ts';

const HOOK = pathToFileURL(resolve(import.meta.dirname, '../helpers/record-modules.ts')).href;
/** Modules a boot loaded when this test was written (905 on SQLite); a new dependency at boot shows here first. */
const BUDGET = 1000;
const LAZY = ['arctic', '@oslojs', '@modelcontextprotocol/sdk', 'ajv', 'zod-to-json-schema', 'ai', '@ai-sdk', 'stripe', '@scalar/api-reference'];

test('a boot loads neither the MCP SDK, arctic nor the AI SDK, and stays within its module budget', async () => {
  const gw = await startGateway({ postgres: false, env: { NODE_OPTIONS: `--import=${HOOK}`, CITYGATE_TEST_MODULES_OUT: 'modules.txt' } });
  assert.equal((await fetch(`${gw.url}/health`)).status, 200);
  assert.equal(await gw.stop(), 0);
  const modules = readFileSync(join(gw.dir, 'modules.txt'), 'utf8').split('\n');
  assert.ok(modules.length > 500, `the hook saw ${modules.length} modules: it did not record the boot`);
  const packageOf = (url: string) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
  const loaded = new Set(modules.map(packageOf).filter((p) => p !== undefined));
  // a name in LAZY is a package, or a whole scope ('@oslojs': any of its packages)
  const early = LAZY.filter((p) => [...loaded].some((l) => l === p || l.startsWith(`${p}/`)));
  assert.deepEqual(early, [], `loaded at boot: ${early.join(', ')}`);
  assert.ok(modules.length <= BUDGET, `a boot loaded ${modules.length} modules (budget ${BUDGET})`);
});
