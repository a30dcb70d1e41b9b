// The Node log sink: log lines are collected and written to stdout in one write per turn of
// the event loop (setImmediate) instead of one console.log (and one write syscall) per line.
// Nothing is dropped: the buffer is written when it grows large, on flush() (the server's
// graceful stop) and, synchronously, when the process exits (stdout to a file or a pipe is
// written synchronously on POSIX, so process.exit does not cut it off).

export interface LineWriter {
  write(line: string): void;
  /** Writes what is buffered now. */
  flush(): void;
}

const FLUSH_AT_CHARS = 64 * 1024;

const writers = new Set<LineWriter>();
let exitHook = false;

export function bufferedLines(out: { write(s: string): unknown } = process.stdout): LineWriter {
  let buf = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (buf === '') return;
    const s = buf;
    buf = '';
    out.write(s);
  };
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => {
      for (const w of writers) w.flush();
    });
  }
  const writer: LineWriter = {
    write(line) {
      buf += line + '\n';
      if (buf.length >= FLUSH_AT_CHARS) flush();
      else if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
  writers.add(writer);
  return writer;
}
