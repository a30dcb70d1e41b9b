// A logged stream's chunks made into its answer, after the response (request logs): an event
// stream's events go to the action's assembler (services/ai/request-log.ts), any other stream
// is kept as text.
import type { StreamAssembler } from './request-log.ts';

/** Event data fed to an assembler at most (a runaway stream stops being assembled, marked truncated). */
const MAX_ASSEMBLED_INPUT = 8 * 1024 * 1024;
/** Text kept of a stream that is not made of events. */
const MAX_RAW_TEXT = 256 * 1024;

export interface Assembled {
  assembled: unknown;
  events?: number;
  truncated: boolean;
}

export function assembleStream(chunks: readonly Uint8Array[], sse: boolean, asm: StreamAssembler | null): Assembled {
  const decoder = new TextDecoder();
  if (!sse) {
    let text = '';
    for (const c of chunks) {
      text += decoder.decode(c, { stream: true });
      if (text.length > MAX_RAW_TEXT) return { assembled: text.slice(0, MAX_RAW_TEXT), truncated: true };
    }
    return { assembled: text + decoder.decode(), truncated: false };
  }
  let events = 0;
  let fed = 0;
  let truncated = false;
  let name: string | undefined;
  let data: string[] = [];
  const texts: string[] = [];
  const dispatch = () => {
    const d = data.join('\n');
    data = [];
    events++;
    fed += d.length;
    if (fed > MAX_ASSEMBLED_INPUT) {
      truncated = true;
      return;
    }
    if (!asm) texts.push(d);
    else {
      try {
        asm.event(name, d);
      } catch {
        /* an event the assembler cannot read: skipped */
      }
    }
  };
  const line = (l: string) => {
    if (l === '') {
      if (data.length) dispatch();
      name = undefined;
    } else if (l.startsWith('data:')) data.push(l.slice(l.charAt(5) === ' ' ? 6 : 5));
    else if (l.startsWith('event:')) name = l.slice(6).trim();
  };
  let rest = '';
  for (const c of chunks) {
    const text = rest + decoder.decode(c, { stream: true });
    let at = 0;
    for (;;) {
      const nl = text.indexOf('\n', at);
      if (nl < 0) break;
      const l = text.slice(at, nl);
      at = nl + 1;
      line(l.endsWith('\r') ? l.slice(0, -1) : l);
    }
    rest = text.slice(at);
  }
  if (rest) line(rest);
  if (data.length) dispatch();
  let assembled: unknown;
  try {
    assembled = asm ? asm.result() : texts.join('\n');
  } catch {
    assembled = null;
  }
  return { assembled, events, truncated };
}
