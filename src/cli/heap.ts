// The memory of `citygate serve`, sized for a gateway (many short requests) rather than left to
// V8's and glibc's defaults for a machine with plenty of memory. Left alone, under load V8 grows
// the young generation to 2 × 64 MB and lets the old generation reach up to 4 × its live size
// before a full collection: 300–450 MB peak RSS at 32 busy connections; with these, ~165–190 MB
// (issue 11; `npm run bench` prints each server's peak RSS).
//   --max-semi-space-size=8     young generation at most 2 × 8 MB. V8 reads it only at start,
//                               so `serve` re-executes itself with it (process.execve: the same
//                               process id, nothing else runs first) when it is not given;
//   --no-allocation-site-pretenuring
//                               V8 otherwise learns, under load, that objects made at some
//                               places in the code (undici's response headers, the calls'
//                               deadlines, …) often outlive a young collection, since 32
//                               requests are always in flight in a 16 MB young generation,
//                               and from then on allocates them straight in the old
//                               generation, where every one of them dies: full collections
//                               every ~0.5 s. Without it a call costs 15–20 % less CPU (json
//                               and stream, paired runs of bench/pair.ts) for ~5–10 MB more
//                               peak RSS. Passed to the re-execution, or set at run time;
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
// All of it together costs no CPU: a call takes 4–6 % less than with V8's defaults (which
// pretenure too), paired runs of bench/pair.ts with CITYGATE_HEAP_TUNING=0 as the other server.
// (A growth of 30 % saves ~15 MB more and costs ~10 % more CPU: full collections come oftener.)
// A value of your own (on the command line or in NODE_OPTIONS, or MALLOC_ARENA_MAX) wins;
// CITYGATE_HEAP_TUNING=0 turns all of them off.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';

export const SEMI_SPACE_FLAG = '--max-semi-space-size=8';
export const HEAP_GROWING_FLAG = '--heap-growing-percent=50';
export const PRETENURING_FLAG = '--no-allocation-site-pretenuring';

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
      const flags = pretenuringGiven() ? [SEMI_SPACE_FLAG] : [SEMI_SPACE_FLAG, PRETENURING_FLAG];
      process.execve(process.execPath, [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)], {
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
  // not re-executed (the operator's own young generation): V8 checks it as it collects (set at run
  // time it gave the same 15–20 % as on the command line, bench/pair.ts)
  if (!pretenuringGiven()) v8.setFlagsFromString(PRETENURING_FLAG);
}

const pretenuringGiven = () => given('--allocation-site-pretenuring') || given('--no-allocation-site-pretenuring');
