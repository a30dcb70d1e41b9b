#!/usr/bin/env node
// The citygate command line.
// Commands load lazily: `citygate cities list` does not pay for the server's imports.
import { CliError } from './output.ts';

const USAGE = `usage: citygate <command>

  serve                     start the gateway (HOST, PORT, DATABASE_PATH or DATABASE_URL, GATEWAY_WORKERS,
                            LOCAL_LOGIN, GATEWAY_SERVICES)
  init [dir] --target edge|node
                            scaffold a project: city.json, package.json, entry, .gitignore, .env.example
  deploy [dir] [--dry-run] [--verify-only] [--verify] [--account-id ID]
                            deploy a cloudflare-workers project and register it as the current gateway

  gateways list|use|add|remove        registered gateways (the CLI config file)
  cities list|create|pause|activate|remove
  tokens apply --city ID --user ID
  env list|set|rm|import FILE
  models                    the model catalog (admin view)
  usage [REPORT]            usage records and totals
  admin-key [--show]        the current gateway's admin key (DATABASE_PATH=… or DATABASE_URL=… reads a database)
  db copy --from sqlite:PATH --to postgres://…
                            copy a SQLite deployment's data into a new PostgreSQL database (one time)

Admin commands act on the current gateway or --gateway NAME|URL; --json prints JSON.
`;

type Run = (args: string[]) => Promise<number>;
const admin = (name: 'citiesCommand' | 'envCommand' | 'gatewaysCommand' | 'modelsCommand' | 'tokensCommand' | 'usageCommand'): Run => async (a) =>
  (await import('./admin.ts'))[name](a);
const commands: Record<string, Run> = {
  serve: async () => (await import('./serve.ts')).serveCommand(),
  init: async (a) => (await import('./init.ts')).initCommand(a),
  deploy: async (a) => (await import('./deploy/index.ts')).deployCommand(a),
  gateways: admin('gatewaysCommand'),
  cities: admin('citiesCommand'),
  tokens: admin('tokensCommand'),
  env: admin('envCommand'),
  models: admin('modelsCommand'),
  usage: admin('usageCommand'),
  'admin-key': async (a) => (await import('./admin-key.ts')).adminKeyCommand(a),
  db: async (a) => (await import('./db.ts')).dbCommand(a),
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
// The server's V8 heap flags (heap.ts); may re-execute this process before anything is loaded.
if (cmd === 'serve') (await import('./heap.ts')).tuneHeap();
try {
  const code = await run(args);
  if (code !== 0 || cmd !== 'serve') process.exitCode = code;
} catch (e) {
  process.stderr.write(`citygate ${cmd}: ${(e as Error).message}\n`);
  process.exitCode = e instanceof CliError ? e.exitCode : 1;
}
