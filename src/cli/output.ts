// How commands print: human-readable tables by default, JSON with --json; errors as one
// clean line on stderr and exit code 1.

export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

export interface Out {
  json: boolean;
  write(text: string): void;
  line(text?: string): void;
}

export function out(json = false, stream: NodeJS.WritableStream = process.stdout): Out {
  return {
    json,
    write: (t) => void stream.write(t),
    line: (t = '') => void stream.write(`${t}\n`),
  };
}

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** A plain text table; columns default to the keys of the rows, in first-seen order. */
export function table(rows: Record<string, unknown>[], columns?: (string | [key: string, header: string])[]): string {
  const cols: [string, string][] = (columns ?? [...new Set(rows.flatMap((r) => Object.keys(r)))]).map((c) =>
    Array.isArray(c) ? c : [c, c.toUpperCase().replace(/_/g, ' ')],
  );
  if (rows.length === 0) return '(none)\n';
  const cells = rows.map((r) => cols.map(([k]) => {
    const s = cell(r[k]);
    return s.length > 80 ? `${s.slice(0, 77)}...` : s;
  }));
  const widths = cols.map(([, h], i) => Math.max(h.length, ...cells.map((row) => row[i].length)));
  const fmt = (row: string[]) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [fmt(cols.map(([, h]) => h)), ...cells.map(fmt)].join('\n') + '\n';
}

/** Key/value lines for one object. */
export function record(obj: Record<string, unknown>): string {
  const keys = Object.keys(obj);
  const w = Math.max(0, ...keys.map((k) => k.length));
  return keys.map((k) => `${k.padEnd(w)}  ${cell(obj[k])}`).join('\n') + '\n';
}

/** Prints a result: JSON as is, or a table of its items, or its fields. */
export function print(o: Out, result: unknown, columns?: (string | [string, string])[]): void {
  if (o.json) return o.line(JSON.stringify(result, null, 2));
  const items = (result as { items?: unknown })?.items;
  if (Array.isArray(items)) return o.write(table(items as Record<string, unknown>[], columns));
  if (Array.isArray(result)) return o.write(table(result as Record<string, unknown>[], columns));
  if (result && typeof result === 'object') {
    // One resource of a listable kind prints as a one-row table, like its list.
    return o.write(columns ? table([result as Record<string, unknown>], columns) : record(result as Record<string, unknown>));
  }
  o.line(String(result));
}
