// Argument parsing for every command: node:util parseArgs, strict, with usage in errors.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CliError } from './output.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

export const COMMON: Options = {
  gateway: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

export function parse<O extends Options>(args: string[], options: O, usage: string) {
  try {
    const r = parseArgs({ args, options: { ...COMMON, ...options }, allowPositionals: true, strict: true });
    return { values: r.values as Record<string, string | boolean | undefined>, positionals: r.positionals };
  } catch (e) {
    throw new CliError(`${(e as Error).message}\n\nusage: ${usage}`);
  }
}

export function need(v: string | undefined, what: string, usage: string): string {
  if (!v) throw new CliError(`missing ${what}\n\nusage: ${usage}`);
  return v;
}
