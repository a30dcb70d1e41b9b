// env: runtime environment variables in the gateway's own table (admin only).
import { z } from 'zod';
import { badRequest, notFound } from '../../kernel/errors.ts';
import { action, defineService, queryBool } from '../../kernel/service.ts';
import { ENV_KEY, parseDotenv } from './dotenv.ts';

const SECRET_KEY = /(_KEY|_SECRET|_TOKEN|_PASSWORD)$/;
const ADMIN_KEY = 'GATEWAY_ADMIN_SECRET_KEY';
const key = z.string().regex(ENV_KEY, 'must match ^[A-Z_][A-Z0-9_]*$');
const value = z.string().max(64 * 1024);

export const isSecretKey = (k: string) => SECRET_KEY.test(k);
const mask = (v: string) => (v.length < 16 ? '••••••••' : `••••••••${v.slice(-4)}`);

function checkAdminKey(k: string, v: string): void {
  // The admin key may be rotated but never weakened: a short one would be guessable.
  if (k === ADMIN_KEY && v.length < 24) throw badRequest('weak_admin_key', `${ADMIN_KEY} must be at least 24 characters.`, 'value');
}

export const envService = defineService({
  id: 'env',
  name: 'Environment',
  description: 'Runtime environment variables kept in the gateway’s own table; they take effect at once.',
  actions: {
    list: action({
      method: 'GET',
      auth: ['admin'],
      summary: 'List env entries (secret values masked unless reveal=true)',
      output: z.object({ items: z.array(z.object({ key: z.string(), value: z.string(), secret: z.boolean() })) }),
      input: z.object({ reveal: queryBool.optional() }),
      handler: ({ input, gateway }) => ({
        items: gateway.env.entries().map((e) => {
          const secret = isSecretKey(e.key);
          return { key: e.key, value: secret && !input.reveal ? mask(e.value) : e.value, secret };
        }),
      }),
    }),
    upsert: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Write one env variable',
      output: z.object({ key: z.string(), secret: z.boolean(), updated: z.literal(true) }),
      input: z.object({ key, value }),
      handler: async ({ input, gateway }) => {
        checkAdminKey(input.key, input.value);
        await gateway.env.set(input.key, input.value);
        return { key: input.key, secret: isSecretKey(input.key), updated: true };
      },
    }),
    remove: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Delete an env variable',
      input: z.object({ key }),
      handler: async ({ input, gateway }) => {
        if (input.key === ADMIN_KEY) throw badRequest('protected_key', `${ADMIN_KEY} cannot be removed; upsert a new value to rotate it.`, 'key');
        if (!(await gateway.env.remove(input.key))) throw notFound('env_key_not_found', `No env entry '${input.key}'.`, 'key');
        return { key: input.key, removed: true };
      },
    }),
    import: action({
      method: 'POST',
      auth: ['admin'],
      summary: 'Import a .env file, all or nothing',
      input: z.object({ content: z.string().max(512 * 1024) }),
      handler: async ({ input, gateway }) => {
        const entries = parseDotenv(input.content);
        for (const e of entries) checkAdminKey(e.key, e.value);
        await gateway.env.setMany(entries.map(({ key, value }) => ({ key, value })));
        return { imported: entries.length, keys: entries.map((e) => e.key) };
      },
    }),
  },
});
