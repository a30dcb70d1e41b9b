// balance: prepaid credits per (city_id, user_id), an append-only ledger, and the 'billing'
// capability the ai service charges calls through.
import { sql } from 'kysely';
import { z } from 'zod';
import { budgetOf } from './budget.ts';
import { isUniqueViolation } from '../../db/database.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import { badRequest, conflict, forbidden } from '../../kernel/errors.ts';
import { boundCity, type Identity } from '../../kernel/identity.ts';
import { BILLING } from '../../kernel/metering.ts';
import { action, defineService, pageQuery } from '../../kernel/service.ts';
import { cityIdSchema } from '../cities/index.ts';
import { initialGrant } from './billing.ts';
import { LeaseBilling } from './lease.ts';
import { WINDOWS, WindowEngine } from './windows/index.ts';
import { lowAlertWritten, moveStatements, newEntryId, openStatements, OPEN_LEN, toEntry, usdOf } from './ledger.ts';
import { dispatchSoon } from '../webhooks/dispatch.ts';

export { LedgerBilling } from './billing.ts';
export { LeaseBilling } from './lease.ts';
export { moveStatements, newEntryId, openStatements, OPEN_LEN, usdOf } from './ledger.ts';
export const balanceGrant = initialGrant;

const userIdSchema = z.string().min(1).max(200);

/** The city an admin or bureau may act on: a bureau only its own. */
export function scopeCity(identity: Identity, cityId: string | undefined): string | undefined {
  const bound = boundCity(identity);
  if (bound && cityId && cityId !== bound) throw forbidden('city_mismatch', 'This credential is bound to another city.');
  return bound ?? cityId;
}

/** The balance of a user, opening it (with the starting grant) on first sight. */
export async function balanceOf(gw: GatewayContext, cityId: string, userId: string): Promise<number> {
  const read = () =>
    gw.db.kysely.selectFrom('balances').select('credits').where('city_id', '=', cityId).where('user_id', '=', userId).executeTakeFirst();
  let row = await read();
  if (!row) {
    await gw.db.batch(openStatements(gw.db, cityId, userId, initialGrant(gw), Date.now()));
    row = await read();
  }
  return row?.credits ?? 0;
}

const seqCursor = (c: string | undefined): number | undefined => {
  if (c === undefined) return undefined;
  if (!/^\d{1,15}$/.test(c)) throw badRequest('invalid_cursor', 'cursor is not one this API returned.', 'cursor');
  return Number(c);
};

async function ledgerPage(gw: GatewayContext, f: { cityId?: string; userId?: string; cursor?: string; limit: number }) {
  let q = gw.db.kysely.selectFrom('ledger').selectAll();
  if (f.cityId) q = q.where('city_id', '=', f.cityId);
  if (f.userId) q = q.where('user_id', '=', f.userId);
  const before = seqCursor(f.cursor);
  if (before !== undefined) q = q.where('seq', '<', before);
  const rows = await q.orderBy('seq', 'desc').limit(f.limit + 1).execute();
  const more = rows.length > f.limit;
  const page = rows.slice(0, f.limit);
  return {
    rows: page,
    next_cursor: more ? String(page[page.length - 1].seq) : null,
  };
}

/** This gateway's engines (another service may wrap the BILLING capability: stop the real ones). */
const engines = new WeakMap<GatewayContext, { billing: LeaseBilling; windows: WindowEngine }>();

export const balanceService = defineService({
  id: 'balance',
  name: 'Balance',
  description: 'Prepaid credits per user of a city (1 USD = 1,000,000 credits), kept in an append-only ledger.',
  env: [
    { key: 'BALANCE_INITIAL_CREDITS', description: 'Credits granted to each new user (default 0).', required: false },
    { key: 'BALANCE_HOLD_TTL_SECONDS', description: 'Holds of calls older than this are returned (default 3600).', required: false },
    { key: 'BALANCE_FLUSH_MS', description: 'How often a process writes the charges of its calls to the ledger (default 200).', required: false },
    { key: 'BALANCE_LEASE_TTL_SECONDS', description: 'Credit leases of a process that stopped renewing them are returned after this (default 30).', required: false },
    { key: 'MODEL_PRICES', description: 'JSON prices per model id (credits per 1M tokens, per image, per second, per request).', required: false },
  ],
  init(gw) {
    const billing = new LeaseBilling(gw);
    gw.provide(BILLING, billing);
    const windows = new WindowEngine(gw);
    gw.provide(WINDOWS, windows); // rolling windows: plans, key budgets (issue 34)
    engines.set(gw, { billing, windows });
    gw.waitUntil(billing.sweep());
    if (gw.config.gracefulStop) billing.startSweeper(); // a long-lived process: on a timer too
  },
  async stop(gw) {
    // Slices of windows first (their calls are done once the drain is), then the credit leases.
    await engines.get(gw)?.windows.stop();
    await engines.get(gw)?.billing.stop();
  },
  actions: {
    me: action({
      method: 'GET',
      auth: ['user'],
      summary: 'The balance of the calling user',
      output: z.object({
        city_id: z.string(),
        user_id: z.string(),
        credits: z.number().int(),
        usd: z.number(),
        budget: z
          .object({ credits: z.number().int(), period: z.enum(['day', 'month']), spent: z.number().int(), remaining: z.number().int(), resets_at: z.iso.datetime() })
          .optional()
          .describe("the city's cap on what one user spends per period, and what is left of it"),
      }),
      input: z.object({ city_id: z.string().optional() }),
      handler: async ({ gateway, identity }) => {
        const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
        const [credits, budget] = await Promise.all([balanceOf(gateway, cityId, userId), budgetOf(gateway, cityId, userId)]);
        return { city_id: cityId, user_id: userId, credits, usd: usdOf(credits), ...(budget ? { budget } : {}) };
      },
    }),
    history: action({
      method: 'GET',
      auth: ['user'],
      summary: 'The ledger of the calling user, newest first',
      input: z.object({ city_id: z.string().optional(), ...pageQuery }),
      handler: async ({ gateway, identity, input }) => {
        const { cityId, userId } = identity as Extract<Identity, { kind: 'user' }>;
        const page = await ledgerPage(gateway, { cityId, userId, cursor: input.cursor, limit: input.limit });
        return { items: page.rows.map(toEntry), next_cursor: page.next_cursor };
      },
    }),
    list: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Balances of a city (a bureau sees only its own city)',
      input: z.object({ city_id: cityIdSchema.optional(), ...pageQuery }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id);
        let q = gateway.db.kysely.selectFrom('balances').select(['city_id', 'user_id', 'credits', 'created_at', 'updated_at']);
        if (cityId) q = q.where('city_id', '=', cityId);
        if (input.cursor) {
          const [c, u] = pairCursor(input.cursor);
          q = q.where((eb) => eb.or([eb('city_id', '>', c), eb.and([eb('city_id', '=', c), eb('user_id', '>', u)])]));
        }
        const rows = await q.orderBy('city_id').orderBy('user_id').limit(input.limit + 1).execute();
        const page = rows.slice(0, input.limit);
        const last = page[page.length - 1];
        return {
          items: page.map((r) => ({
            city_id: r.city_id,
            user_id: r.user_id,
            credits: r.credits,
            usd: usdOf(r.credits),
            created_at: new Date(r.created_at).toISOString(),
            updated_at: new Date(r.updated_at).toISOString(),
          })),
          next_cursor: rows.length > input.limit ? JSON.stringify([last.city_id, last.user_id]) : null,
        };
      },
    }),
    get: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'The balance of one user of a city (read only: a user never seen has the starting grant to come)',
      input: z.object({ city_id: cityIdSchema, user_id: userIdSchema }),
      output: z.object({ city_id: z.string(), user_id: z.string(), credits: z.number().int(), usd: z.number(), exists: z.boolean() }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id)!;
        const row = await gateway.db.kysely
          .selectFrom('balances')
          .select('credits')
          .where('city_id', '=', cityId)
          .where('user_id', '=', input.user_id)
          .executeTakeFirst();
        const credits = row?.credits ?? initialGrant(gateway);
        return { city_id: cityId, user_id: input.user_id, credits, usd: usdOf(credits), exists: !!row };
      },
    }),
    ledger: action({
      method: 'GET',
      auth: ['admin', 'bureau'],
      summary: 'Ledger entries, newest first (filter by city and user)',
      input: z.object({ city_id: cityIdSchema.optional(), user_id: userIdSchema.optional(), ...pageQuery }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id);
        const page = await ledgerPage(gateway, { cityId, userId: input.user_id, cursor: input.cursor, limit: input.limit });
        return {
          items: page.rows.map((r) => ({ city_id: r.city_id, user_id: r.user_id, ...toEntry(r), actor: r.actor })),
          next_cursor: page.next_cursor,
        };
      },
    }),
    adjust: action({
      method: 'POST',
      auth: ['admin', 'bureau'],
      summary: 'Add (or with a negative amount, take) credits, once per idempotency key',
      errors: [409],
      input: z.object({
        city_id: cityIdSchema,
        user_id: userIdSchema,
        credits: z.number().int().refine((n) => n !== 0 && Math.abs(n) <= 1e15, 'must be a non-zero integer of at most 1e15'),
        reason: z.string().trim().min(1).max(500),
        idempotency_key: z.string().min(1).max(200),
      }),
      handler: async ({ gateway, identity, input }) => {
        const cityId = scopeCity(identity, input.city_id)!;
        const db = gateway.db;
        const key = `adjust:${cityId}:${input.idempotency_key}`;
        const actor = identity.kind === 'bureau' ? `bureau:${identity.bureauId}` : identity.kind;
        const at = Date.now();
        const entryId = newEntryId();
        let applied = false;
        try {
          const res = await db.batch([
            ...openStatements(db, cityId, input.user_id, initialGrant(gateway), at),
            ...moveStatements(db, {
              entryId,
              key,
              cityId,
              userId: input.user_id,
              kind: 'adjust',
              delta: sql`${input.credits}`,
              guard: sql`b.credits + ${input.credits} >= 0`,
              reason: input.reason,
              actor,
              at,
            }),
          ]);
          applied = res[OPEN_LEN].changes === 1;
          if (lowAlertWritten(res, OPEN_LEN)) gateway.waitUntil(dispatchSoon(gateway));
        } catch (e) {
          if (!isUniqueViolation(e)) throw e;
        }
        const row = await db.kysely.selectFrom('ledger').selectAll().where('idempotency_key', '=', key).executeTakeFirst();
        if (!row) {
          const credits = await balanceOf(gateway, cityId, input.user_id);
          throw conflict('insufficient_credits', `The balance (${credits} credits) cannot go below zero.`, 'credits');
        }
        if (!applied && (row.user_id !== input.user_id || row.credits !== input.credits)) {
          throw conflict('idempotency_key_reused', 'This idempotency key was used for a different adjustment.', 'idempotency_key');
        }
        const credits = await balanceOf(gateway, cityId, input.user_id);
        return { city_id: cityId, user_id: input.user_id, credits, usd: usdOf(credits), replayed: !applied, entry: toEntry(row) };
      },
    }),
  },
});

function pairCursor(s: string): [string, string] {
  try {
    const v = JSON.parse(s) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') return [v[0], v[1]];
  } catch {
    /* below */
  }
  throw badRequest('invalid_cursor', 'cursor is not one this API returned.', 'cursor');
}
