// Parses the text of a .env file: comments, blank lines, `export `, single and double quotes,
// escapes and multi-line values in double quotes. Any bad line fails the whole file.
import { badRequest } from '../../kernel/errors.ts';

export const ENV_KEY = /^[A-Z_][A-Z0-9_]*$/;

export interface DotenvEntry {
  key: string;
  value: string;
  line: number;
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', '"': '"', '\\': '\\', $: '$' };

export function parseDotenv(content: string): DotenvEntry[] {
  const lines = content.replace(/\r\n?/g, '\n').split('\n');
  const out: DotenvEntry[] = [];
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const line = lines[i].trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([^=\s]+)\s*=\s*(.*)$/.exec(line);
    if (!m) throw badRequest('invalid_env_file', `line ${lineNo}: expected KEY=value.`, `content:${lineNo}`);
    const key = m[1];
    if (!ENV_KEY.test(key)) {
      throw badRequest('invalid_env_file', `line ${lineNo}: '${key}' is not a valid key (A-Z, 0-9, _).`, `content:${lineNo}`);
    }
    let rest = m[2];
    let value: string;
    if (rest.startsWith('"')) {
      // Double quotes: escapes, and the value may run over several lines.
      let buf = rest.slice(1);
      let end = closingQuote(buf);
      while (end < 0 && i + 1 < lines.length) {
        i++;
        buf += '\n' + lines[i];
        end = closingQuote(buf);
      }
      if (end < 0) throw badRequest('invalid_env_file', `line ${lineNo}: unterminated double quote.`, `content:${lineNo}`);
      value = buf.slice(0, end).replace(/\\(.)/g, (all, ch: string) => ESCAPES[ch] ?? all);
      assertTrailing(buf.slice(end + 1), lineNo);
    } else if (rest.startsWith("'")) {
      const end = rest.indexOf("'", 1);
      if (end < 0) throw badRequest('invalid_env_file', `line ${lineNo}: unterminated single quote.`, `content:${lineNo}`);
      value = rest.slice(1, end);
      assertTrailing(rest.slice(end + 1), lineNo);
    } else {
      value = rest.replace(/\s+#.*$/, '').trim();
    }
    out.push({ key, value, line: lineNo });
  }
  return out;
}

function closingQuote(s: string): number {
  for (let j = 0; j < s.length; j++) {
    if (s[j] === '\\') j++;
    else if (s[j] === '"') return j;
  }
  return -1;
}

function assertTrailing(rest: string, lineNo: number): void {
  const t = rest.trim();
  if (t !== '' && !t.startsWith('#')) {
    throw badRequest('invalid_env_file', `line ${lineNo}: unexpected text after the closing quote.`, `content:${lineNo}`);
  }
}
