// Which tools a city offers: each enabled server's tools, as its upstream lists them, filtered
// by the server's allow- or deny-list and named `<server>__<tool>`. An upstream's list is kept
// per process for TOOLS_TTL_MS (a changed server is listed again at once); a server that is
// down or whose circuit is open is left out of tools/list rather than failing the whole list.
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { GatewayContext } from '../../kernel/context.ts';
import { breakerOf, breakerKey } from './breaker.ts';
import { cityServers, type ServerRow } from './store.ts';
import { clientFor } from './upstream.ts';
import { describeError } from './errors.ts';
import { SEPARATOR, toolAllowed } from './tool-rules.ts';

const TOOLS_TTL_MS = 60_000;
const MAX_PAGES = 20;

const listed = new Map<string, { at: number; tools: Promise<Tool[]> }>();

/** The server's whole tool list, from its upstream (all pages), unfiltered. */
export async function upstreamTools(gw: GatewayContext, row: ServerRow, fresh = false): Promise<Tool[]> {
  const k = `${row.server_id}\x1f${row.updated_at}`;
  const hit = listed.get(k);
  if (!fresh && hit && Date.now() - hit.at < TOOLS_TTL_MS) return hit.tools;
  const tools = (async () => {
    const c = clientFor(gw, row);
    try {
      const client = await c.client;
      const out: Tool[] = [];
      let cursor: string | undefined;
      for (let i = 0; i < MAX_PAGES; i++) {
        const page = await client.listTools(cursor ? { cursor } : {}, { timeout: row.timeout_ms });
        out.push(...page.tools);
        cursor = page.nextCursor;
        if (!cursor) break;
      }
      return out;
    } catch (e) {
      c.drop();
      throw e;
    } finally {
      c.done();
    }
  })();
  if (listed.size > 1000) listed.clear();
  listed.set(k, { at: Date.now(), tools });
  tools.catch(() => listed.delete(k));
  return tools;
}

export function forgetTools(serverId: string): void {
  for (const k of listed.keys()) if (k.startsWith(`${serverId}\x1f`)) listed.delete(k);
}

/** tools/list for a city: every allowed tool of its enabled, reachable servers. */
export async function cityTools(gw: GatewayContext, cityId: string): Promise<Tool[]> {
  const rows = (await cityServers(gw, cityId)).filter((r) => r.enabled === 1);
  const breaker = breakerOf(gw);
  const lists = await Promise.all(
    rows.map(async (row) => {
      const key = breakerKey(row);
      if (!breaker.callable(key)) return [];
      try {
        const tools = await upstreamTools(gw, row);
        return tools.filter((t) => toolAllowed(row, t.name)).map((t) => ({ ...t, name: `${row.name}${SEPARATOR}${t.name}` }));
      } catch (e) {
        gw.log('warn', 'mcp: could not list the tools of a server', { city_id: cityId, server: row.name, error: describeError(e) });
        return [];
      }
    }),
  );
  return lists.flat();
}
