// The shape every payment provider adapter has (stripe.ts = provider A, creem.ts = provider B).
import type { PaymentsTable } from '../../db/schema.ts';
import type { GatewayContext } from '../../kernel/context.ts';
import type { RefundFacts } from './refunds.ts';

export type MethodId = 'a' | 'b';

/** What a provider says happened to a checkout, from a verified source only. */
export interface Facts {
  /** Our payment id as the provider echoes it (metadata / request id). */
  paymentId: string | null;
  /** The provider's id of the checkout. */
  ref: string | null;
  state: 'paid' | 'expired' | 'failed' | 'pending' | 'ignored';
  amountPaid?: number | null;
  currency?: string | null;
}

export interface VerifiedEvent extends Facts {
  eventId: string;
  type: string;
  /** A refund or dispute of a paid checkout (refunds.ts). */
  refund?: RefundFacts;
}

export interface Quote {
  credits: number;
  /** Minor units (cents). */
  amount: number;
  currency: string;
  units: number | null;
}

export interface ProviderStatus {
  enabled: boolean;
  reason?: string;
  /** How webhooks are trusted: a signature, or reading the checkout back from the provider. */
  verification: 'signature' | 'api';
}

export interface PaymentProvider {
  id: MethodId;
  name: 'stripe' | 'creem';
  title: string;
  status(gw: GatewayContext): ProviderStatus;
  quote(gw: GatewayContext, credits: number): Promise<Quote>;
  createCheckout(
    gw: GatewayContext,
    p: PaymentsTable,
    urls: { success: string; cancel: string },
  ): Promise<{ ref: string; url: string }>;
  /** Verifies a webhook (throws a 400 when it cannot be trusted) and says what it means. */
  verifyWebhook(gw: GatewayContext, raw: Uint8Array, headers: Headers, find: (paymentId: string | null, ref: string | null) => Promise<PaymentsTable | undefined>): Promise<VerifiedEvent>;
  /** Reads the checkout back from the provider's API. */
  readBack(gw: GatewayContext, p: PaymentsTable): Promise<Facts>;
}

export const CREDITS_PER_USD_DEFAULT = 1_000_000;

export function creditsPerUsd(gw: GatewayContext): number {
  const v = Number(gw.env.get('PAYMENT_CREDITS_PER_USD') ?? CREDITS_PER_USD_DEFAULT);
  return Number.isSafeInteger(v) && v > 0 ? v : CREDITS_PER_USD_DEFAULT;
}

/** The most one checkout may cost, in minor units (PAYMENT_MAX_AMOUNT, default 1,000,000 = 10,000.00). */
export function maxAmount(gw: GatewayContext): number {
  const v = Number(gw.env.get('PAYMENT_MAX_AMOUNT') ?? 1_000_000);
  return Number.isSafeInteger(v) && v > 0 ? v : 1_000_000;
}
