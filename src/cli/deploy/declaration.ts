// city.json: the project declaration (seed §1). Validated with zod; every error names the
// field and says how to fix it. Secrets never go here: they live in the gateway's env table.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

export const DECLARATION_FILE = 'city.json';
export const TARGETS = ['cloudflare-workers', 'node'] as const;
export type Target = (typeof TARGETS)[number];

const WORKER_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const BINDING = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESOURCE_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const BUCKET_NAME = /^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])$/;
const SECRETISH = /(secret|password|token|api[_-]?key|^env$|^vars$|^secrets$|credential)/i;

const str = (what: string, example: string, pattern?: RegExp, rule?: string) => {
  let s = z.string({
    error: (iss) => (iss.input === undefined ? `missing: add ${what} (for example ${example})` : `must be a string, for example ${example}`),
  });
  if (pattern) s = s.regex(pattern, `'${'${value}'}' is not valid: ${rule}`);
  return s;
};

// zod's regex messages cannot see the value; add it afterwards (see formatIssues).
const binding = (example: string) =>
  str('"binding"', `"${example}"`, BINDING, 'a binding is a JavaScript identifier (letters, digits and _), e.g. ' + example);

const strictObject = <T extends z.ZodRawShape>(shape: T, where: string) =>
  z.strictObject(shape, {
    error: (iss) =>
      iss.code === 'unrecognized_keys'
        ? undefined
        : iss.input === undefined
          ? `missing: add ${where}`
          : `must be an object, for example ${where}`,
  });

export const declarationSchema = strictObject(
  {
    schema: z.literal(1, { error: (iss) => (iss.input === undefined ? 'missing: add "schema": 1' : 'unsupported declaration version: set "schema": 1') }),
    type: z.literal('city', { error: () => 'must be "city": set "type": "city"' }),
    name: str(
      '"name"',
      '"my-gateway"',
      WORKER_NAME,
      'use lowercase letters, digits and -, at most 63 characters, not starting or ending with -',
    ),
    target: z.enum(TARGETS, {
      error: (iss) =>
        iss.input === undefined
          ? 'missing: add "target": "cloudflare-workers" (edge) or "node" (container)'
          : `must be "cloudflare-workers" (edge) or "node" (container), got ${JSON.stringify(iss.input)}`,
    }),
    entry: str('"entry"', '"src/index.ts"').min(1, 'must not be empty: set "entry": "src/index.ts"'),
    resources: strictObject(
      {
        database: strictObject(
          {
            binding: binding('DB').optional(),
            name: str('"name"', '"my-gateway-db"', RESOURCE_NAME, 'use lowercase letters, digits and -').optional(),
          },
          '{"binding": "DB", "name": "<name>-db"}',
        ).optional(),
        queue: strictObject(
          {
            binding: binding('JOBS').optional(),
            name: str('"name"', '"my-gateway-queue"', RESOURCE_NAME, 'use lowercase letters, digits and -').optional(),
          },
          '{"binding": "JOBS", "name": "<name>-queue"}',
        ).optional(),
        storage: strictObject(
          {
            type: z.literal('r2', { error: () => 'must be "r2" (Cloudflare R2): set "type": "r2"' }),
            binding: binding('MEDIA'),
            name: str('"name"', '"my-gateway-media"', BUCKET_NAME, 'a bucket name has 3 to 63 lowercase letters, digits and -'),
            public_url_prefix: z
              .string({ error: () => 'must be a URL string, e.g. "https://media.example.com"' })
              .refine((v) => v === '' || /^https:\/\/[^\s/]+/.test(v), 'must be an https URL, e.g. "https://media.example.com" (or leave it out to serve files through the gateway)')
              .optional(),
          },
          '{"type": "r2", "binding": "MEDIA", "name": "<name>-media"}',
        ).optional(),
      },
      '{"database": {...}, "queue": {...}}',
    ).optional(),
  },
  '{"schema": 1, "type": "city", "name": "...", "target": "cloudflare-workers", "entry": "src/index.ts"}',
);

export type RawDeclaration = z.infer<typeof declarationSchema>;

/** The declaration with defaults applied. */
export interface Declaration {
  schema: 1;
  type: 'city';
  name: string;
  target: Target;
  entry: string;
  resources: {
    database: { binding: string; name: string };
    queue: { binding: string; name: string };
    storage: { type: 'r2'; binding: string; name: string; public_url_prefix: string | null } | null;
  };
}

export class DeclarationError extends Error {
  readonly problems: string[];
  constructor(file: string, problems: string[]) {
    super(`${file} is not valid:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.problems = problems;
  }
}

function formatIssues(raw: unknown, issues: z.core.$ZodIssue[]): string[] {
  return issues.map((iss) => {
    if (iss.code === 'unrecognized_keys') {
      const where = iss.path.length ? `${iss.path.join('.')}: ` : '';
      return iss.keys
        .map((k) =>
          SECRETISH.test(k)
            ? `${where}${k}: secrets and provider keys never go in city.json; remove it and run \`citygate env set KEY VALUE\` after deploying`
            : `${where}${k}: unknown field; remove it${where ? '' : ' (fields: schema, type, name, target, entry, resources)'}`,
        )
        .join('\n  - ');
    }
    let value: unknown = raw;
    for (const p of iss.path) value = (value as Record<PropertyKey, unknown> | undefined)?.[p as string];
    const message = iss.message.replace('${value}', String(value));
    return `${iss.path.join('.') || '(top level)'}: ${message}`;
  });
}

/** Validates a parsed declaration and applies the defaults. */
export function validateDeclaration(raw: unknown, file = DECLARATION_FILE): Declaration {
  const parsed = declarationSchema.safeParse(raw);
  if (!parsed.success) throw new DeclarationError(file, formatIssues(raw, parsed.error.issues));
  const d = parsed.data;
  const r = d.resources ?? {};
  const storage = r.storage
    ? { type: 'r2' as const, binding: r.storage.binding, name: r.storage.name, public_url_prefix: r.storage.public_url_prefix || null }
    : null;
  const database = { binding: r.database?.binding ?? 'DB', name: r.database?.name ?? `${d.name}-db` };
  const queue = { binding: r.queue?.binding ?? 'JOBS', name: r.queue?.name ?? `${d.name}-queue` };
  const bindings = [database.binding, queue.binding, ...(storage ? [storage.binding] : [])];
  const dup = bindings.find((b, i) => bindings.indexOf(b) !== i);
  if (dup) throw new DeclarationError(file, [`resources: the binding '${dup}' is used twice; give each resource its own binding`]);
  return { schema: 1, type: 'city', name: d.name, target: d.target, entry: d.entry, resources: { database, queue, storage } };
}

/** Reads and validates <dir>/city.json. */
export function readDeclaration(dir: string): Declaration {
  const file = join(dir, DECLARATION_FILE);
  if (!existsSync(file)) {
    throw new DeclarationError(file, [`no ${DECLARATION_FILE} here: run \`citygate init ${dir === '.' ? '' : dir + ' '}--target edge\` or pass the project directory`]);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new DeclarationError(file, [`not valid JSON (${(e as Error).message}); fix the syntax`]);
  }
  const decl = validateDeclaration(raw, file);
  if (!existsSync(join(dir, decl.entry))) {
    throw new DeclarationError(file, [`entry: ${decl.entry} does not exist in ${dir}; create it or point "entry" at the Worker's source file`]);
  }
  return decl;
}
