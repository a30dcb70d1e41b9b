// A node:test reporter (npm test adds it beside the spec reporter): at the end of a run, the 20
// test files that took longest, wall time from the file's own summary. The suite's time is
// watched file by file, so a new slow file shows in the first run that has it.
import type { TestEvent } from 'node:test/reporters';

export default async function* slowestFiles(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const files = new Map<string, number>();
  for await (const event of source) {
    if (event.type !== 'test:summary') continue;
    const { file, duration_ms } = event.data as { file?: string; duration_ms: number };
    if (file) files.set(file, duration_ms);
  }
  const cwd = `${process.cwd()}/`;
  const top = [...files].sort((a, b) => b[1] - a[1]).slice(0, 20);
  yield `\nThe ${top.length} slowest test files (wall time, s):\n`;
  for (const [file, ms] of top) yield `${(ms / 1000).toFixed(1).padStart(7)}  ${file.replace(cwd, '')}\n`;
}
