// The Chat Completions request as citygate checks it: only what it needs to route, bill and
// relay is validated here; everything else goes to the upstream untouched (and an upstream
// 400 comes back as a 400 with the upstream's reason).
import { z } from 'zod';
import type { Measured } from '../../../kernel/metering.ts';
import { maxOutputOf, type ModelDef } from '../catalog/registry.ts';

const positiveInt = z.number().int().positive();

export const chatInput = z
  .object({
    model: z.string().min(1).max(256),
    messages: z
      .array(z.object({ role: z.string().min(1) }).loose())
      .min(1),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_usage: z.boolean().nullish() }).loose().nullish(),
    max_tokens: positiveInt.nullish(),
    max_completion_tokens: positiveInt.nullish(),
    n: positiveInt.max(128).nullish(),
    city_id: z.string().optional(),
  })
  .loose();

export type ChatInput = z.output<typeof chatInput>;

/** Worst case of a chat call: every input byte a token, the full output limit for each choice. */
export function reservationFor(input: ChatInput, model: ModelDef, inputBytes: number): Partial<Measured> {
  const maxOut = maxOutputOf(model, input.max_completion_tokens, input.max_tokens);
  return { input_tokens: inputBytes, output_tokens: maxOut * (input.n ?? 1) };
}
