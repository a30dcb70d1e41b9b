// Processes as Linux shows them in /proc, for the tests of GATEWAY_WORKERS.
import { readdirSync, readFileSync } from 'node:fs';

/** The live child processes of a process (from /proc). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === pid && fields[0] !== 'Z') out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}
