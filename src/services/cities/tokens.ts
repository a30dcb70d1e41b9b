import { z } from 'zod';
import type { GatewayContext } from '../../kernel/context.ts';

const DAY = 86_400;
export const DEFAULT_TTL_SECONDS = 7 * DAY;
export const MAX_TTL_SECONDS = 30 * DAY;

export const userIdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.@:-]*$/, 'letters, digits and _ . @ : - only');

export const tokenApplyInput = z.object({
  city_id: z.string().min(1).max(64),
  user_id: userIdSchema,
  ttl: z.number().int().min(60).max(MAX_TTL_SECONDS).optional().describe('seconds; default 7 days, at most 30'),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

export interface IssuedToken {
  user_token: string;
  city_id: string;
  user_id: string;
  expires_at: string;
}

/** Signs a user token; callers check that the city is live and active first. */
export async function issueUserToken(
  gw: GatewayContext,
  a: { city_id: string; user_id: string; ttl?: number; metadata?: Record<string, unknown> },
): Promise<IssuedToken> {
  const expiresAt = Date.now() + (a.ttl ?? DEFAULT_TTL_SECONDS) * 1000;
  const token = await gw.keys.sign({ cityId: a.city_id, userId: a.user_id, expiresAt, metadata: a.metadata });
  return { user_token: token, city_id: a.city_id, user_id: a.user_id, expires_at: new Date(Math.floor(expiresAt / 1000) * 1000).toISOString() };
}
