// The inputs and the answer of accounts/keys/* (zod: the 400s name the field, and /openapi.json
// and the client SDK are generated from these).
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { cityIdSchema } from '../../cities/index.ts';
import { userIdSchema } from '../../cities/tokens.ts';

export const KEY_WINDOWS = ['day', 'week', '30d'] as const;
/** Active keys one user may hold. */
export const MAX_KEYS_PER_USER = 100;

const ipOrCidr = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .refine((s) => (s.includes('/') ? ipaddr.isValidCIDR(s) : ipaddr.isValid(s)), 'not an IP address or CIDR (e.g. 203.0.113.7, 10.0.0.0/8, 2001:db8::/32)');

const keyFields = {
  name: z.string().trim().min(1).max(100).describe('what the key is for, e.g. "laptop claude"'),
  models: z
    .array(z.string().trim().min(1).max(200))
    .min(1)
    .max(100)
    .nullable()
    .optional()
    .describe('model ids or aliases the key may call (404 model_not_found for any other); null or absent: every model the city allows'),
  budget: z
    .object({
      credits: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
      window: z.enum(KEY_WINDOWS).nullable().optional().describe('a rolling window; absent or null: a total over the key’s life'),
    })
    .strict()
    .nullable()
    .optional()
    .describe('what the key may spend (402 key_budget_exceeded past it), on top of the user’s balance and the city’s user budget'),
  expires_at: z.iso
    .datetime({ offset: true })
    .transform((s) => Date.parse(s))
    .refine((t) => t > Date.now(), 'must be in the future')
    .nullable()
    .optional()
    .describe('ISO-8601; absent or null: never'),
  allowed_ips: z.array(ipOrCidr).min(1).max(100).nullable().optional().describe('client addresses (IPs or CIDRs) the key is accepted from; null or absent: any'),
  rpm: z.number().int().min(1).max(1_000_000).nullable().optional().describe('requests per minute (POST calls), on top of the user’s and the city’s limits'),
};

export const keyIdSchema = z
  .string()
  .trim()
  .regex(/^(cg_key_)?[a-z0-9]{12}$/, 'a key id (12 of a-z, 0-9, as in the key’s prefix cg_key_<id>)')
  .transform((s) => s.replace(/^cg_key_/, ''));

/** Who the key is for: bureaus name the user, the admin the city and the user; a user neither. */
const owner = {
  city_id: cityIdSchema.optional().describe('admin: required; a user or bureau: its own city'),
  user_id: userIdSchema.optional().describe('bureau and admin: required; a user: only themself'),
};

export const createInput = z.object({ ...owner, ...keyFields }).strict();

export const updateInput = z
  .object({
    id: keyIdSchema,
    city_id: cityIdSchema.optional(),
    name: keyFields.name.optional(),
    models: keyFields.models,
    budget: keyFields.budget,
    expires_at: keyFields.expires_at,
    allowed_ips: keyFields.allowed_ips,
    rpm: keyFields.rpm,
  })
  .strict();

export const revokeInput = z.object({ id: keyIdSchema, city_id: cityIdSchema.optional() }).strict();

export const listInput = z
  .object({
    ...owner,
    status: z.enum(['active', 'revoked', 'expired']).optional(),
    cursor: z.string().max(300).optional(),
    limit: z.number().int().min(1).max(200).default(100),
  })
  .strict();

const iso = z.iso.datetime();

export const keyView = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string().describe('cg_key_<id>: how the key starts (the secret is never shown again)'),
  city_id: z.string(),
  user_id: z.string(),
  models: z.array(z.string()).nullable(),
  budget: z.object({ credits: z.number().int(), window: z.enum(KEY_WINDOWS).nullable() }).nullable(),
  spent: z
    .object({ credits: z.number().int(), window_start: iso.optional(), resets_at: iso.optional() })
    .nullable()
    .describe('with a budget: credits spent (calls in flight included) in the current window, or in total'),
  expires_at: iso.nullable(),
  allowed_ips: z.array(z.string()).nullable(),
  rpm: z.number().int().nullable(),
  status: z.enum(['active', 'revoked', 'expired']),
  created_at: iso,
  last_used_at: iso.nullable().describe('within a minute'),
});
export type KeyView = z.infer<typeof keyView>;

export const keyAnswer = z.object({ key: keyView });
export const createdAnswer = z.object({ key: keyView, secret: z.string().describe('the key: shown here only, never again') });
export const listAnswer = z.object({ items: z.array(keyView), next_cursor: z.string().nullable() });
