// The mcp service's queries: a city's MCP servers, their credentials sealed at rest (sealed
// with their row as additional data, so sealed credentials cannot move to another server).
// Rows are read often (every tools/list and tools/call), so each process keeps a city's rows
// for a few seconds; a change made here drops them at once, another process sees it within
// CACHE_MS.
import type { Selectable } from 'kysely';
import type { McpServersTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { isSealed } from '../../kernel/secrets.ts';
import { heldSecret } from './secrets.ts';

export type ServerRow = Selectable<McpServersTable>;

/** The credentials of a server, as stored (sealed) in `auth`. */
export type ServerAuth =
  | { type: 'none' }
  | { type: 'headers'; headers: Record<string, string> }
  | { type: 'oauth'; token_url: string; client_id: string; client_secret: string; scope?: string; audience?: string };

const label = (serverId: string) => `mcp_servers:${serverId}`;

export async function sealAuth(gw: GatewayContext, serverId: string, auth: ServerAuth): Promise<string | null> {
  if (auth.type === 'none') return null;
  const text = JSON.stringify(auth);
  const box = gw.env.secrets;
  return box ? box.seal(text, label(serverId)) : text;
}

const opened = new Map<string, ServerAuth>();

/** The server's credentials in clear (kept per process by their sealed text); registered for redaction. */
export async function openAuth(gw: GatewayContext, row: Pick<ServerRow, 'server_id' | 'auth'>): Promise<ServerAuth> {
  if (!row.auth) return { type: 'none' };
  const k = `${row.server_id}:${row.auth}`;
  const hit = opened.get(k);
  if (hit) return hit;
  let text = row.auth;
  if (isSealed(text)) {
    const box = gw.env.secrets;
    if (!box) throw new Error('MCP server credentials are sealed but no master key is configured');
    text = await box.open(text, label(row.server_id));
  }
  const auth = JSON.parse(text) as ServerAuth;
  if (auth.type === 'headers') for (const v of Object.values(auth.headers)) heldSecret(v);
  if (auth.type === 'oauth') heldSecret(auth.client_secret);
  if (opened.size > 1000) opened.clear();
  opened.set(k, auth);
  return auth;
}

const CACHE_MS = 3000;
const byCity = new Map<string, { at: number; rows: Promise<ServerRow[]> }>();

export function listServers(gw: GatewayContext, cityId: string | undefined): Promise<ServerRow[]> {
  let q = gw.db.kysely.selectFrom('mcp_servers').selectAll();
  if (cityId !== undefined) q = q.where('city_id', '=', cityId);
  return q.orderBy('city_id').orderBy('name').execute();
}

/** A city's servers, from this process's short cache. */
export function cityServers(gw: GatewayContext, cityId: string): Promise<ServerRow[]> {
  const now = Date.now();
  const hit = byCity.get(cityId);
  if (hit && now - hit.at < CACHE_MS) return hit.rows;
  const rows = listServers(gw, cityId);
  byCity.set(cityId, { at: now, rows });
  rows.catch(() => byCity.delete(cityId));
  return rows;
}

export function forgetCity(cityId: string): void {
  byCity.delete(cityId);
}

export function getServer(gw: GatewayContext, serverId: string): Promise<ServerRow | undefined> {
  return gw.db.kysely.selectFrom('mcp_servers').selectAll().where('server_id', '=', serverId).executeTakeFirst();
}
