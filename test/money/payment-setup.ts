// Shared setup of the payment tests (payment, payment-guards, refunds): citygate in front of the
// Stripe and Creem stubs, both methods enabled and verified by webhook secrets, each stub
// delivering its webhooks to this gateway; and the ways a test delivers an event itself.
import { startGateway, type TestGateway } from '../helpers/gateway.ts';
import { call, client } from '../helpers/http.ts';
import { signCreemPayload, startCreemStub, type CreemStub } from '../stubs/creem.ts';
import { signStripePayload, startStripeStub, type StripeStub } from '../stubs/stripe.ts';
import type { Client } from './setup.ts';

export const STRIPE_WHSEC = 'whsec_citygate_test';
export const CREEM_WHSEC = 'creem_whsec_citygate';
/** The Creem product sold for credits: 5.00 USD a unit (5,000,000 credits at the default rate). */
export const CREEM_PRODUCT = { id: 'prod_credits', price: 500, currency: 'USD', name: '5 USD of credits' };

export interface PaymentWorld {
  stripe: StripeStub;
  creem: CreemStub;
  gw: TestGateway;
  admin: Client;
  close(): Promise<void>;
}

/** Starts both stubs and a gateway using them; `env` adds to (or overrides) the payment keys. */
export async function startPaymentWorld(env: Record<string, string> = {}): Promise<PaymentWorld> {
  const stripe = await startStripeStub({ webhookSecret: STRIPE_WHSEC });
  const creem = await startCreemStub({ webhookSecret: CREEM_WHSEC, products: [CREEM_PRODUCT] });
  let gw: TestGateway;
  try {
    gw = await startGateway({
      env: {
        PAYMENT_A_SECRET_KEY: stripe.apiKey,
        PAYMENT_A_WEBHOOK_SECRET: STRIPE_WHSEC,
        PAYMENT_A_API_BASE: stripe.origin,
        PAYMENT_B_API_KEY: creem.apiKey,
        PAYMENT_B_PRODUCT_ID: CREEM_PRODUCT.id,
        PAYMENT_B_WEBHOOK_SECRET: CREEM_WHSEC,
        PAYMENT_B_API_BASE: creem.baseUrl,
        ...env,
      },
    });
  } catch (e) {
    await stripe.close();
    await creem.close();
    throw e;
  }
  stripe.setWebhook(`${gw.url}/v1/payment/webhook/a`);
  creem.setWebhook(`${gw.url}/v1/payment/webhook/b`);
  return {
    stripe,
    creem,
    gw,
    admin: client(gw.url, gw.adminKey),
    async close() {
      await gw.stop();
      await stripe.close();
      await creem.close();
    },
  };
}

/** A user's balance, as the user reads it. */
export const creditsOf = async (c: Client) => (await c.get('/v1/balance/me')).body.credits as number;

/** POSTs a raw webhook body with the given headers, as a provider (or a forger) would. */
export const postWebhook = (gw: TestGateway, path: string, raw: string, headers: Record<string, string>) =>
  call(gw.url, 'POST', path, { raw, headers: { 'content-type': 'application/json', ...headers } });

/** An event of the test's own making, signed with the Stripe webhook secret. */
export const signedStripe = (gw: TestGateway, event: unknown) => {
  const raw = JSON.stringify(event);
  return postWebhook(gw, '/v1/payment/webhook/a', raw, { 'stripe-signature': signStripePayload(raw, STRIPE_WHSEC) });
};

/** An event of the test's own making, signed with the Creem webhook secret. */
export const signedCreem = (gw: TestGateway, event: unknown) => {
  const raw = JSON.stringify(event);
  return postWebhook(gw, '/v1/payment/webhook/b', raw, { 'creem-signature': signCreemPayload(raw, CREEM_WHSEC) });
};
