// The memory of `citygate serve`, sized for a gateway (many short requests) rather than left to
// V8's and glibc's defaults for a machine with plenty of memory. Left alone, under load V8 grows
// the young generation to 2 × 64 MB and lets the old generation reach up to 4 × its live size
// before a full collection: 300–450 MB peak RSS at 32 busy connections; with these, ~170–190 MB
// (issue 11; `npm run bench` prints each server's peak RSS).
//   --max-semi-space-size=8     young generation at most 2 × 8 MB. V8 reads it only at start,
//                               so `serve` re-executes itself with it (process.execve: the same
//                               process id, nothing else runs first) when it is not given;
//   MALLOC_ARENA_MAX=2          set for that re-execution when unset: glibc otherwise keeps an
//                               arena per thread (V8's compiler and GC threads), ~15–20 MB more;
//   --heap-growing-percent=50   the old generation grows 50 % past what the last full
//                               collection kept. V8 reads it at every collection, so it is set
//                               at run time (a Node that no longer knows it ignores it);
//   NODE_COMPILE_CACHE          set for the re-execution when unset (Node's own default
//                               directory): the sources' type-stripped text and V8 code come
//                               from the cache after the first boot, so Node never loads its
//                               TypeScript stripper (amaro, a WebAssembly build of SWC):
//                               ~15 MB less RSS, idle and under load, and boots ~2× faster.
// The price is CPU: every request still alive at a young collection is promoted, so full
// collections come often under load (~15–20 % more CPU per call at saturation, measured with
// bench; 30 % growth saves ~15 MB more and costs ~10 % more CPU again).
// A value of your own (on the command line or in NODE_OPTIONS, or MALLOC_ARENA_MAX) wins;
// CITYGATE_HEAP_TUNING=0 turns all three off.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';

export const SEMI_SPACE_FLAG = '--max-semi-space-size=8';
export const HEAP_GROWING_FLAG = '--heap-growing-percent=50';

/** Whether the node flag `name` (e.g. --max-semi-space-size) was given (`-` and `_` are the same to V8). */
function given(name: string): boolean {
  const norm = (s: string) => s.replace(/_/g, '-');
  const want = norm(name);
  const args = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  return args.some((a) => norm(a.split('=')[0]) === want);
}

/** Call first thing in `serve`: may replace this process with itself plus the young-generation flag. */
export function tuneHeap(): void {
  if (process.env.CITYGATE_HEAP_TUNING === '0') return;
  // Set by the re-execution below: never a second time, whatever execArgv says.
  const reexecuted = process.env.CITYGATE_HEAP_REEXEC === '1';
  delete process.env.CITYGATE_HEAP_REEXEC;
  if (!reexecuted && !given('--max-semi-space-size') && typeof process.execve === 'function') {
    try {
      process.execve(process.execPath, [process.execPath, SEMI_SPACE_FLAG, ...process.execArgv, ...process.argv.slice(1)], {
        MALLOC_ARENA_MAX: '2',
        NODE_COMPILE_CACHE: join(tmpdir(), 'node-compile-cache'),
        ...process.env,
        CITYGATE_HEAP_REEXEC: '1',
      });
    } catch {
      // not allowed here: run on with V8's young generation
    }
  }
  if (!given('--heap-growing-percent')) v8.setFlagsFromString(HEAP_GROWING_FLAG);
}
