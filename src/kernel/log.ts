// One JSON object per line. Callers pass only what is safe to print: never a credential
// or a request body.
export type LogFields = Record<string, unknown>;
export type Logger = (level: 'info' | 'warn' | 'error', msg: string, fields?: LogFields) => void;

export function jsonLogger(write: (line: string) => void = (l) => console.log(l)): Logger {
  return (level, msg, fields) => write(JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields }));
}

export const silentLogger: Logger = () => {};
