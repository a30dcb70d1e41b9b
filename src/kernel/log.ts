// One JSON object per line. Callers pass only what is safe to print: never a credential
// or a request body.
export type LogFields = Record<string, unknown>;
export type Logger = (level: 'info' | 'warn' | 'error', msg: string, fields?: LogFields) => void;

export function jsonLogger(write: (line: string) => void = (l) => console.log(l)): Logger {
  return (level, msg, fields) => write(JSON.stringify({ t: isoNow(), level, msg, ...fields }));
}

// The timestamp: Date's ISO text (over a µs here) is made once per second; each millisecond only
// writes its three digits after it (under load nearly every line has a millisecond of its own).
let lastMs = -1;
let lastIso = '';
let secondFrom = -1;
let secondPrefix = ''; // `YYYY-MM-DDTHH:MM:SS.`
function isoNow(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    const sub = ms % 1000;
    if (ms - sub !== secondFrom || ms < 0) {
      secondFrom = ms - sub;
      lastIso = new Date(ms).toISOString();
      secondPrefix = lastIso.slice(0, 20);
    } else lastIso = `${secondPrefix}${sub < 10 ? '00' : sub < 100 ? '0' : ''}${sub}Z`;
  }
  return lastIso;
}

export const silentLogger: Logger = () => {};
