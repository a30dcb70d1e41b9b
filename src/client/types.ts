// The client's types, derived from the server's own action definitions so they cannot drift:
// inputs are `z.input<>` of each action's schema, outputs are what its handler returns (or,
// for handlers that answer a raw Response, its declared `output` schema). Type-only imports:
// none of this reaches a bundle.
import type { z } from 'zod';
import type { UIMessageChunk } from 'ai';
import type { accountsService } from '../services/accounts/index.ts';
import type { aiService } from '../services/ai/index.ts';
import type { AsrJsonInput } from '../services/ai/media/speech.ts';
import type { balanceService } from '../services/balance/index.ts';
import type { bureausService } from '../services/bureaus/index.ts';
import type { citiesService } from '../services/cities/index.ts';
import type { envService } from '../services/env/index.ts';
import type { paymentService } from '../services/payment/index.ts';
import type { plansService } from '../services/plans/index.ts';
import type { usageService } from '../services/usage/index.ts';
import type { webhooksService } from '../services/webhooks/index.ts';
import type { mcpService } from '../services/mcp/index.ts';

/** Every stock service's actions, by service id and action id. */
export interface Registry {
  env: (typeof envService)['actions'];
  cities: (typeof citiesService)['actions'];
  bureaus: (typeof bureausService)['actions'];
  accounts: (typeof accountsService)['actions'];
  balance: (typeof balanceService)['actions'];
  payment: (typeof paymentService)['actions'];
  plans: (typeof plansService)['actions'];
  usage: (typeof usageService)['actions'];
  ai: (typeof aiService)['actions'];
  webhooks: (typeof webhooksService)['actions'];
  mcp: (typeof mcpService)['actions'];
}

export type ServiceId = keyof Registry;
export type ActionId<S extends ServiceId> = keyof Registry[S] & string;

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** What an action accepts: the input side of its zod schema (defaults optional, pre-coercion). */
export type InputOf<A> = A extends { input?: infer S } ? (S extends z.ZodType ? Simplify<z.input<S>> : Record<string, never>) : Record<string, never>;

type HandlerResult<A> = A extends { handler(...args: never[]): infer R } ? Exclude<Awaited<R>, Response> : never;
type Declared<A> = A extends { output?: infer O } ? (O extends z.ZodType ? (z.ZodType extends O ? never : z.output<O>) : never) : never;

type LooseMember<T> = T extends unknown ? (string extends keyof T ? true : false) : never;
type Loose<T> = unknown extends T ? true : true extends LooseMember<T> ? true : false;

/**
 * What an action answers: the handler's own return type; its declared `output` schema when the
 * handler answers a raw Response or a loose record (`Record<string, unknown>`).
 */
export type OutputOf<A> = [HandlerResult<A>] extends [never]
  ? Declared<A>
  : Loose<HandlerResult<A>> extends true
    ? [Declared<A>] extends [never]
      ? HandlerResult<A>
      : Declared<A>
    : HandlerResult<A>;

export type Input<S extends ServiceId, A extends ActionId<S>> = InputOf<Registry[S][A]>;
export type Output<S extends ServiceId, A extends ActionId<S>> = OutputOf<Registry[S][A]>;

// Named shapes, for products that want to spell them.
export type Model = Output<'ai', 'models'>['items'][number];
export type TextInput = Input<'ai', 'text'>;
export type TextMessage = Output<'ai', 'text'>;
export type ImageJob = Output<'ai', 'image/result'>;
export type VideoJob = Output<'ai', 'video'>;
export type TtsInput = Input<'ai', 'tts'>;
export type AsrInput = Omit<AsrJsonInput, 'audio'> & {
  /** Audio bytes (sent as multipart) or a base64 string / data URL (sent as JSON). */
  audio?: Blob | Uint8Array | ArrayBuffer | string;
};
export type Transcript = Output<'ai', 'asr'>;
export type City = Output<'cities', 'current'>;
/** A city with its limits and user budget, as the admin and its own bureau read it (cities/get, list, update). */
export type CityWithSettings = Output<'cities', 'get'>;
export type IssuedToken = Output<'cities', 'tokens/apply'>;
export type LoginResult = Output<'accounts', 'oauth/result'>;
export type OAuthStart = Output<'accounts', 'oauth/start'>;
export type Profile = Output<'accounts', 'me'>;
export type Balance = Output<'balance', 'me'>;
export type Payment = Output<'payment', 'payments/me'>['items'][number];
export type Checkout = Output<'payment', 'checkout'>;
export type UsageRecord = Output<'usage', 'me'>['items'][number];
export type { UIMessageChunk };

/** The one error body of every route. */
export interface ErrorBody {
  error: { type: string; code: string; message: string; param?: string };
}
