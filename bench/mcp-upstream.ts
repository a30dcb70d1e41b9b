// The bench's upstream MCP server in a process of its own (so the load generator's CPU does not
// slow it down): test/stubs/mcp-upstream.ts with one echo tool; prints its URL, runs until killed.
import { startMcpStub } from '../test/stubs/mcp-upstream.ts';

const up = await startMcpStub({ name: 'bench', tools: [{ name: 'echo' }] });
console.log(up.url);
process.on('SIGTERM', () => void up.close().then(() => process.exit(0)));
