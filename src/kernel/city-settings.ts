// Per-city settings kept as JSON on the city row (cities/update, admin): rate limits that
// override the RATE_LIMIT_* env keys for one city, and a spending cap per user.
import { z } from 'zod';

const perMinute = z.number().int().min(0).max(1_000_000_000).nullable().optional();

/** 0 turns a limit off for this city; null (or absent) falls back to the env key. */
export const cityLimitsSchema = z.strictObject({
  user_rpm: perMinute.describe('requests per minute per user'),
  user_tpm: perMinute.describe('tokens per minute per user'),
  city_rpm: perMinute.describe('requests per minute for the whole city'),
  city_tpm: perMinute.describe('tokens per minute for the whole city'),
  user_concurrency: perMinute.describe('requests in flight per user'),
});
export type CityLimits = z.infer<typeof cityLimitsSchema>;

export const userBudgetSchema = z.strictObject({
  credits: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).describe('credits one user may spend per period'),
  period: z.enum(['day', 'month']).describe('calendar day or month, UTC'),
});
export type UserBudget = z.infer<typeof userBudgetSchema>;

export interface CitySettings {
  limits?: CityLimits;
  user_budget?: UserBudget | null;
}

export function parseCitySettings(json: string | null | undefined): CitySettings {
  if (!json) return {};
  try {
    const v = JSON.parse(json) as CitySettings;
    return v && typeof v === 'object' ? v : {};
  } catch {
    return {};
  }
}
