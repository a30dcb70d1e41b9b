// MCP servers as data, per city (issue 36): the upstream MCP servers whose tools a city offers
// its users through /v1/mcp. `auth` is the server's credentials as one JSON document sealed at
// rest (static headers, or OAuth client credentials), never shown again once written; `tools`
// is the allow- or deny-list, `prices` the per-tool overrides of `price` (credits per call).
// A server's name is unique in its city: tools are named `<name>__<tool>` to the city's users.
export default [
  `CREATE TABLE IF NOT EXISTS mcp_servers (
     server_id TEXT PRIMARY KEY NOT NULL,
     city_id TEXT NOT NULL,
     name TEXT NOT NULL,
     url TEXT NOT NULL,
     auth_type TEXT NOT NULL DEFAULT 'none',
     auth TEXT,
     tool_filter TEXT NOT NULL DEFAULT 'all',
     tools TEXT NOT NULL DEFAULT '[]',
     price INTEGER NOT NULL DEFAULT 0,
     prices TEXT NOT NULL DEFAULT '{}',
     timeout_ms INTEGER NOT NULL DEFAULT 30000,
     enabled INTEGER NOT NULL DEFAULT 1,
     description TEXT NOT NULL DEFAULT '',
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     UNIQUE (city_id, name)
   )`,
];
