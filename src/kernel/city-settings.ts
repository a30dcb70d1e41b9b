// Per-city settings kept as JSON on the city row (cities/update, admin): rate limits that
// override the RATE_LIMIT_* env keys for one city, a spending cap per user, and the city's
// models and prices (an allow-list, a multiplier over the base price, per-model prices), and
// its request logs (over REQUEST_LOG).
import { z } from 'zod';
import type { Prices } from './metering.ts';
import { REQUEST_LOG_MODES, type RequestLogMode } from './request-log.ts';

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

const credits = z.number().min(0).max(1e12);
/** A price object in credits (1 USD = 1,000,000; per_mtok: per million tokens). */
export const pricesSchema = z
  .strictObject({
    input_per_mtok: credits.optional(),
    output_per_mtok: credits.optional(),
    cached_per_mtok: credits.optional().describe('cache reads'),
    cache_write_per_mtok: credits.optional().describe('cache writes, 5-minute cache'),
    cache_write_1h_per_mtok: credits.optional().describe('cache writes, 1-hour cache'),
    per_image: credits.optional(),
    per_second: credits.optional(),
    per_request: credits.optional(),
  })
  .describe('credits (1 USD = 1,000,000); per_mtok: per million tokens; absent fields cost nothing');

const modelRef = z.string().trim().min(1).max(256);
export const cityModelsSchema = z.array(modelRef).max(1000).describe("the models (ids or aliases) this city's users may call; null: all");
export const priceMultiplierSchema = z.number().positive().max(1000).describe('the base price × this (1.25 = 25 % over); null: 1');
export const cityPricesSchema = z
  .record(modelRef, pricesSchema.nullable())
  .refine((r) => Object.keys(r).length <= 1000, { message: 'at most 1000 models' })
  .describe("per model id: the city's price fields, over base × multiplier (null removes the model's entry)");

export const requestLogSchema = z.enum(REQUEST_LOG_MODES).describe("request logs for this city's AI calls: off, metadata (no bodies) or full (bodies too, redacted); null: the REQUEST_LOG env key");

/** A logo on the users' page: an https URL only (no script, data or plain-http URL), no credentials in it. */
export const logoUrlSchema = z
  .string()
  .trim()
  .max(2048)
  .refine(
    (v) => {
      try {
        const u = new URL(v);
        // a plain host name (or IP) only: the origin goes into the page's CSP img-src
        return u.protocol === 'https:' && !u.username && !u.password && /^[a-z0-9.-]+$|^\[[0-9a-f:.]+\]$/.test(u.hostname);
      } catch {
        return false;
      }
    },
    { message: 'must be an https:// URL (no user or password in it)' },
  )
  .transform((v) => new URL(v).toString());
export const accentColorSchema = z
  .string()
  .trim()
  .regex(/^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/, 'must be a hex colour: #rgb or #rrggbb')
  .transform((v) => v.toLowerCase());

/** The city's users' page (/u/<city_id>/): on unless turned off; its logo and accent colour. */
export const userPageSchema = z.strictObject({
  enabled: z.boolean().optional().describe("false turns the users' page off (it answers 404); default on"),
  logo_url: logoUrlSchema.nullable().optional().describe('https URL of a logo shown on the page; null removes it'),
  accent_color: accentColorSchema.nullable().optional().describe('#rgb or #rrggbb; null: the default'),
});
export interface UserPageSettings {
  enabled?: boolean;
  logo_url?: string;
  accent_color?: string;
}

export interface CitySettings {
  /** The users' page: off when enabled is false; its branding. */
  user_page?: UserPageSettings;
  /** Request logs for this city; absent: REQUEST_LOG. */
  request_log?: RequestLogMode;
  limits?: CityLimits;
  user_budget?: UserBudget | null;
  /** The models the city's users may call (ids or aliases); absent: all. */
  models?: string[];
  /** The base price × this; absent: 1. */
  price_multiplier?: number;
  /** Per model id: price fields that replace base × multiplier. */
  prices?: Record<string, Prices>;
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
