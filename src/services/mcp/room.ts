// Everything of mcp/ that needs the MCP SDK, loaded together through sdk.ts.
export { serveMcp } from './endpoint.ts';
export { describeError } from './errors.ts';
export { forgetTools, upstreamTools } from './tools.ts';
export { closeAll, connect, dropServer } from './upstream.ts';
