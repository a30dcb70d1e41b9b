// POST /v1/ai/embeddings in the OpenAI format, routed like chat/completions (retries,
// fallbacks, circuit breakers): each attempt forwards to an upstream that serves /embeddings
// (OpenAI and OpenAI-compatible), or uses the AI SDK's embedMany for the others (Google).
// Charged by input tokens as the upstream reports them (an estimate when it reports none).
import { z } from 'zod';
import { badRequest, GatewayError } from '../../../kernel/errors.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { forwardAttempt, upstreamBody } from '../upstream/forward.ts';
import { AiCall, BYTES_PER_TOKEN, byteLength, tokenBound } from '../meter.ts';
import { adapters } from '../providers/index.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { candidatesOf, nativeUrlOf, routeCall, type Responder } from '../routing/route.ts';
import type { Upstream } from '../routing/upstreams.ts';
import { loadAi } from '../upstream/sdk.ts';

const tokens = z.array(z.number().int().nonnegative()).min(1);
export const embeddingsInput = z
  .object({
    model: z.string().min(1).max(256),
    input: z.union([z.string(), z.array(z.string()).min(1).max(2048), tokens, z.array(tokens).min(1).max(2048)]),
    dimensions: z.number().int().positive().max(65536).optional(),
    encoding_format: z.enum(['float', 'base64']).optional(),
    user: z.string().optional(),
    city_id: z.string().optional(),
  })
  .loose();
export type EmbeddingsInput = z.output<typeof embeddingsInput>;

/** Worst-case input tokens: a token array counts exactly, a string at most its UTF-8 bytes. */
function inputBound(input: EmbeddingsInput['input']): number {
  if (typeof input === 'string') return tokenBound(input);
  let n = 0;
  for (const x of input) n += typeof x === 'string' ? tokenBound(x) : Array.isArray(x) ? x.length : 1;
  return n;
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);

/** A float vector as OpenAI's base64 encoding: little-endian float32 bytes. */
function base64Floats(v: number[]): string {
  const bytes = new Uint8Array(new Float32Array(v).buffer);
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

export async function embeddings(ctx: ActionContext<EmbeddingsInput>): Promise<Response> {
  const { input, gateway: gw } = ctx;
  const r = await resolveModel(gw, ctx.identity, input.model, 'embeddings');
  const strings = typeof input.input === 'string' ? [input.input] : input.input.every((x) => typeof x === 'string') ? (input.input as string[]) : null;
  // An upstream serves this call when it forwards embeddings, or embeds strings with the AI SDK.
  const serves = (u: Upstream) => nativeUrlOf(u, 'embeddings') !== null || (strings !== null && adapters[u.kind].embeddingModel !== undefined);
  const all = candidatesOf(gw, r.model);
  if (!all.some(serves)) {
    if (strings || !all.some((u) => adapters[u.kind].embeddingModel)) throw new GatewayError(400, 'mode_not_supported', `The model '${input.model}' cannot make embeddings.`, { param: 'model' });
    throw badRequest('invalid_input', `input: token arrays are not supported by the upstream of '${input.model}'; send strings`, 'input');
  }

  const call = AiCall.start(gw, ctx.identity, r, 'embeddings', ctx.requestId, ctx.timing);
  await call.reserve({ input_tokens: inputBound(input.input) });
  const raw = await ctx.rawBody();

  const respond = await routeCall(ctx, call, { model: r.model, operation: 'embeddings', serves, candidates: r.candidates }, async (t, d): Promise<Responder> => {
    const url = nativeUrlOf(t.upstream, 'embeddings');
    if (url) {
      return forwardAttempt(ctx as ActionContext<unknown>, call, t, d, {
        url,
        body: upstreamBody(input, raw, t.upstreamModel),
        stream: false,
        inputBytes: raw.byteLength,
        usageOfJson: (j) => ({ input_tokens: num(j?.usage?.prompt_tokens ?? j?.usage?.total_tokens) }),
        errorEvent: () => '',
      });
    }
    const { embedMany } = await loadAi();
    const res = await embedMany({
      model: await t.adapter.embeddingModel!(t.call, t.upstreamModel),
      values: strings!,
      dimensions: input.dimensions,
      maxRetries: 0,
      abortSignal: d.signal,
    });
    d.clear();
    // Google's embeddings API reports no token counts (the SDK's usage is NaN): rather than a
    // free call, the documented estimate (docs/money.md), never above the hold (inputBound).
    const reported = num(res.usage?.tokens);
    const used = reported || Math.ceil(strings!.reduce((n, s) => n + byteLength(s), 0) / BYTES_PER_TOKEN);
    return async () => {
      await call.finish('ok', { input_tokens: used, ...(reported ? {} : { estimated: true }) });
      const b64 = input.encoding_format === 'base64';
      return Response.json({
        object: 'list',
        data: res.embeddings.map((e, index) => ({ object: 'embedding', index, embedding: b64 ? base64Floats(e) : e })),
        model: input.model,
        usage: { prompt_tokens: used, total_tokens: used },
      });
    };
  });
  return respond();
}
