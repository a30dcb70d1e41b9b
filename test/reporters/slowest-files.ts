// A node:test reporter (test/run.ts feeds it every file's summary): at the end of a run, the 20
// test files that took longest, wall time from the file's own summary. The suite's time is
// watched file by file, so a new slow file shows in the first run that has it (and belongs in
// test/run.ts's SLOW_FIRST).
import type { TestEvent } from 'node:test/reporters';

export default async function* slowestFiles(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const files = new Map<string, number>(); // file → its wall time, ms
  for await (const event of source) {
    if (event.type !== 'test:summary') continue;
    const { file, duration_ms } = event.data as { file?: string; duration_ms: number };
    if (file) files.set(file, duration_ms);
  }
  const cwd = `${process.cwd()}/`;
  const name = (file: string) => file.replace(cwd, '');
  const s = (ms: number) => (ms / 1000).toFixed(1).padStart(7);
  const top = [...files].sort((a, b) => b[1] - a[1]).slice(0, 20);
  let sum = 0;
  for (const ms of files.values()) sum += ms;
  yield `\nThe ${top.length} slowest test files (wall time, s; ${files.size} files, ${(sum / 1000).toFixed(0)} s of file time in all):\n`;
  for (const [file, ms] of top) yield `${s(ms)}  ${name(file)}\n`;
}
