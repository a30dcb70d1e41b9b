// citygate init [dir] --target edge|node [--name NAME]: scaffolds a project that depends on
// citygate: city.json, package.json (build, typecheck), an entry, .gitignore, .env.example.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { parse } from './args.ts';
import { validateDeclaration } from './deploy/declaration.ts';
import { CliError } from './output.ts';

const USAGE = 'citygate init [dir] --target edge|node [--name NAME]';

// The keys the seed names (values never go in files: set them with `citygate env`).
const ENV_KEYS: [string, string][] = [
  ['TEXTPROVIDER_API_KEY', 'key of the text model provider'],
  ['PAYMENT_A_SECRET_KEY', 'payment provider A (Stripe): secret key'],
  ['PAYMENT_A_WEBHOOK_SECRET', 'payment provider A (Stripe): webhook signing secret'],
  ['PAYMENT_B_API_KEY', 'payment provider B (Creem): API key'],
  ['PAYMENT_B_PRODUCT_ID', 'payment provider B (Creem): product for hosted checkout'],
  ['PAYMENT_B_WEBHOOK_SECRET', 'payment provider B (Creem): webhook signing secret (optional)'],
  ['GATEWAY_CITY_BASE_URL', 'public city base URL (payment result pages)'],
  ['OAUTH_A_CLIENT_ID', 'OAuth provider A (GitHub), optional'],
  ['OAUTH_A_CLIENT_SECRET', ''],
  ['OAUTH_B_CLIENT_ID', 'OAuth provider B (Google), optional'],
  ['OAUTH_B_CLIENT_SECRET', ''],
];

function citygateVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function sanitizeName(dir: string): string {
  const n = basename(dir).toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 63);
  return n || 'my-gateway';
}

export function scaffold(dir: string, target: 'edge' | 'node', name: string): Record<string, string> {
  const edge = target === 'edge';
  const entry = edge ? 'src/index.ts' : 'src/server.ts';
  const city = {
    schema: 1,
    type: 'city',
    name,
    target: edge ? 'cloudflare-workers' : 'node',
    entry,
    ...(edge
      ? { resources: { database: { binding: 'DB', name: `${name}-db` }, queue: { binding: 'JOBS', name: `${name}-queue` } } }
      : {}),
  };
  validateDeclaration(city); // the scaffold itself must be valid
  const version = citygateVersion();
  const pkg = {
    name,
    version: '0.1.0',
    private: true,
    type: 'module',
    scripts: edge
      ? {
          build:
            'esbuild src/index.ts --bundle --format=esm --platform=neutral --conditions=workerd,worker,browser --main-fields=workerd,worker,browser,module,main --outfile=dist/worker.js --log-level=warning',
          typecheck: 'tsc --noEmit',
          deploy: 'citygate deploy --verify',
        }
      : { build: 'tsc', typecheck: 'tsc --noEmit', start: 'node dist/server.js' },
    dependencies: { citygate: `^${version}` },
    devDependencies: edge
      ? { '@cloudflare/workers-types': '^5.20261117.1', esbuild: '^0.28.2', typescript: '^7.0.2', wrangler: '^4.164.0' }
      : { '@types/node': '^24.19.2', typescript: '^7.0.2' },
    ...(edge ? {} : { engines: { node: '>=24' } }),
  };
  const tsconfig = {
    compilerOptions: {
      target: 'es2024',
      module: edge ? 'es2022' : 'nodenext',
      moduleResolution: edge ? 'bundler' : 'nodenext',
      strict: true,
      skipLibCheck: true,
      ...(edge ? { noEmit: true, types: ['@cloudflare/workers-types'] } : { outDir: 'dist', types: ['node'] }),
    },
    include: ['src'],
  };
  const entrySource = edge
    ? `// The gateway as a Cloudflare Worker: fetch + queue handlers over D1, Queues and R2,
// with the bindings city.json declares. Pass { services } to mount a custom selection.
import { createWorker } from 'citygate/workers';

export default createWorker();
`
    : `// The gateway as a Node server (HOST, PORT, DATABASE_PATH, LOCAL_LOGIN from the environment).
import { startNodeServer } from 'citygate/node';

const server = await startNodeServer(process.env, { installSignals: true });
console.error(\`citygate listening on \${server.url}\`);
`;
  const gitignore = ['node_modules/', 'dist/', '.wrangler/', '.citygate-wrangler-*.json', '.env', 'data/', '*.sqlite*', ''].join('\n');
  const envExample =
    `# Runtime keys of the gateway. Values never go in files of the project: write them into the\n` +
    `# gateway's env table with \`citygate env set KEY VALUE\`, or fill a copy named .env (ignored by\n` +
    `# git) and run \`citygate env import .env\`.\n` +
    ENV_KEYS.map(([k, d]) => (d ? `\n# ${d}\n${k}=` : `\n${k}=`).replace(/^\n/, '')).join('\n') +
    '\n';
  const readme = `# ${name}

A citygate gateway (${edge ? 'Cloudflare Workers + D1 + Queues' : 'Node'}).

    npm install
${edge ? '    npx wrangler login\n    npx citygate deploy --verify     # creates D1/queue, deploys, registers the gateway\n' : '    npm run build && npm start\n'}    npx citygate env import .env     # provider keys into the gateway's env table
    npx citygate cities create "My product"
`;
  return {
    'city.json': JSON.stringify(city, null, 2) + '\n',
    'package.json': JSON.stringify(pkg, null, 2) + '\n',
    'tsconfig.json': JSON.stringify(tsconfig, null, 2) + '\n',
    [entry]: entrySource,
    '.gitignore': gitignore,
    '.env.example': envExample,
    'README.md': readme,
  };
}

export async function initCommand(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { target: { type: 'string' }, name: { type: 'string' } }, USAGE);
  const target = values.target as string | undefined;
  if (target !== 'edge' && target !== 'node') throw new CliError(`--target must be edge or node\n\nusage: ${USAGE}`);
  if (positionals.length > 1) throw new CliError(`one directory at most\n\nusage: ${USAGE}`);
  const dir = resolve(positionals[0] ?? '.');
  const name = (values.name as string | undefined) ?? sanitizeName(dir);
  let files: Record<string, string>;
  try {
    files = scaffold(dir, target, name);
  } catch (e) {
    throw new CliError(`${(e as Error).message.replace(/^city\.json is not valid:\n/, '')}\n(pass --name with lowercase letters, digits and -)`);
  }
  const clashes = Object.keys(files).filter((f) => existsSync(join(dir, f)));
  if (clashes.length) throw new CliError(`${dir} already has ${clashes.join(', ')}; nothing was written (init a new directory)`);
  for (const [f, text] of Object.entries(files)) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), text);
  }
  const rel = relative(process.cwd(), dir) || '.';
  process.stdout.write(
    `created ${name} (${target === 'edge' ? 'cloudflare-workers' : 'node'}) in ${rel}: ${Object.keys(files).join(', ')}\n\n` +
      `next:\n  cd ${rel}\n  npm install\n` +
      (target === 'edge' ? `  npx wrangler login\n  npx citygate deploy --verify\n` : `  npm run build && npm start\n`),
  );
  return 0;
}
