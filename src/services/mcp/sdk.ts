// The door to what is built on the MCP SDK (endpoint, upstream clients, tool lists, errors): it
// loads on the first MCP request or server test, not at boot. With ajv and zod-to-json-schema it
// is ~160 of the ~1,290 modules a gateway loaded, ~12 % of a boot's CPU, and most gateways (and
// most of the test suite's ~250 boots) never serve MCP. Wrangler bundles it all the same.
import type * as Room from './room.ts';

let loading: Promise<typeof Room> | null = null;
let loaded: typeof Room | null = null;

/** The SDK's room, loaded once. */
export function sdk(): Promise<typeof Room> {
  return (loading ??= import('./room.ts').then((m) => (loaded = m)));
}

/** The room if it has loaded, else null: what it keeps per process (clients, tool lists) exists only then. */
export const loadedSdk = (): typeof Room | null => loaded;
