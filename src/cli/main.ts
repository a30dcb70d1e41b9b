#!/usr/bin/env node
// The citygate command line.
import { adminKeyCommand } from './admin-key.ts';
import { serveCommand } from './serve.ts';

const USAGE = `usage: citygate <command>

  serve        start the gateway (HOST, PORT, DATABASE_PATH, LOCAL_LOGIN, GATEWAY_SERVICES)
  admin-key    print the admin key stored in DATABASE_PATH
`;

const commands: Record<string, (args: string[]) => Promise<number>> = {
  serve: serveCommand,
  'admin-key': adminKeyCommand,
};

const [cmd, ...args] = process.argv.slice(2);
if (!cmd || cmd === 'help' || cmd === '--help' || cmd === '-h') {
  process.stdout.write(USAGE);
  process.exit(cmd ? 0 : 1);
}
const run = commands[cmd];
if (!run) {
  process.stderr.write(`citygate: unknown command '${cmd}'\n\n${USAGE}`);
  process.exit(1);
}
try {
  const code = await run(args);
  if (code !== 0 || cmd !== 'serve') process.exitCode = code;
} catch (e) {
  process.stderr.write(`citygate ${cmd}: ${(e as Error).message}\n`);
  process.exit(1);
}
