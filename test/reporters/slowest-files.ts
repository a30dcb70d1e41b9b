// A node:test reporter (npm test adds it beside the spec reporter): at the end of a run, the 20
// test files that took longest, wall time from the file's own summary, and the files that ended
// last, with when they started: a long file that starts late makes the run's tail, where only it
// runs. The suite's time is watched file by file, so a new slow file shows in the first run that has it.
import type { TestEvent } from 'node:test/reporters';

export default async function* slowestFiles(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const files = new Map<string, { ms: number; endedAt: number }>();
  const started = performance.now();
  for await (const event of source) {
    if (event.type !== 'test:summary') continue;
    const { file, duration_ms } = event.data as { file?: string; duration_ms: number };
    if (file) files.set(file, { ms: duration_ms, endedAt: performance.now() - started });
  }
  const cwd = `${process.cwd()}/`;
  const name = (file: string) => file.replace(cwd, '');
  const s = (ms: number) => (ms / 1000).toFixed(1).padStart(7);
  const top = [...files].sort((a, b) => b[1].ms - a[1].ms).slice(0, 20);
  let sum = 0;
  for (const f of files.values()) sum += f.ms;
  yield `\nThe ${top.length} slowest test files (wall time, s; ${files.size} files, ${(sum / 1000).toFixed(0)} s of file time in all):\n`;
  for (const [file, f] of top) yield `${s(f.ms)}  ${name(file)}\n`;
  const last = [...files].sort((a, b) => b[1].endedAt - a[1].endedAt).slice(0, 5);
  yield `The files that ended last (started at, ended at, s):\n`;
  for (const [file, f] of last) yield `${s(f.endedAt - f.ms)} ${s(f.endedAt)}  ${name(file)}\n`;
}
