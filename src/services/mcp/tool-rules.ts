// How a server's tools become the city's: their names (`<server>__<tool>`), the server's allow-
// or deny-list, and their prices. Plain functions of a server's row, apart from the SDK (sdk.ts).
import type { ServerRow } from './store.ts';

export const SEPARATOR = '__';

const parse = (s: string): string[] => JSON.parse(s) as string[];

/** Whether the server's filter lets the tool through. */
export function toolAllowed(row: Pick<ServerRow, 'tool_filter' | 'tools'>, tool: string): boolean {
  if (row.tool_filter === 'all') return true;
  const list = parse(row.tools);
  return row.tool_filter === 'allow' ? list.includes(tool) : !list.includes(tool);
}

/** Credits per call of a tool: its override, else the server's price. */
export function priceOf(row: Pick<ServerRow, 'price' | 'prices'>, tool: string): number {
  const p = (JSON.parse(row.prices) as Record<string, number>)[tool];
  return typeof p === 'number' ? p : row.price;
}

/** The server and tool a gateway tool name stands for, or null. */
export function splitName(name: string): { server: string; tool: string } | null {
  const i = name.indexOf(SEPARATOR);
  if (i <= 0 || i + SEPARATOR.length >= name.length) return null;
  return { server: name.slice(0, i), tool: name.slice(i + SEPARATOR.length) };
}
