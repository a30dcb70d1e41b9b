// One JSON object per line. Callers pass only what is safe to print: never a credential
// or a request body.
export type LogFields = Record<string, unknown>;
export type Logger = (level: 'info' | 'warn' | 'error', msg: string, fields?: LogFields) => void;

export function jsonLogger(write: (line: string) => void = (l) => console.log(l)): Logger {
  return (level, msg, fields) => write(JSON.stringify({ t: isoNow(), level, msg, ...fields }));
}

// The timestamp, formatted once per millisecond (many lines share one under load).
let lastMs = -1;
let lastIso = '';
function isoNow(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

export const silentLogger: Logger = () => {};
