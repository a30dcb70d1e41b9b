// POST /v1/ai/embeddings in the OpenAI format: forwarded to upstreams that serve
// /embeddings (OpenAI and OpenAI-compatible slots), made with the AI SDK's embedMany for the
// others (Google). Charged by input tokens as the upstream reports them.
import { embedMany } from 'ai';
import { z } from 'zod';
import { badRequest, GatewayError } from '../../kernel/errors.ts';
import type { ActionContext } from '../../kernel/service.ts';
import { forward, upstreamBody } from './forward.ts';
import { AiCall, tokenBound } from './meter.ts';
import { resolveModel, upstreamTimeoutMs } from './resolve.ts';
import { CLIENT_CLOSED, deadline, toGatewayError } from './upstream-errors.ts';

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
  const r = resolveModel(gw, ctx.identity, input.model, 'embeddings');
  const url = r.adapter.nativeUrl?.(r.provider, 'embeddings') ?? null;
  const strings = typeof input.input === 'string' ? [input.input] : input.input.every((x) => typeof x === 'string') ? (input.input as string[]) : null;
  if (!url && !r.adapter.embeddingModel) throw new GatewayError(400, 'mode_not_supported', `The model '${input.model}' cannot make embeddings.`, { param: 'model' });
  if (!url && !strings) throw badRequest('invalid_input', `input: token arrays are not supported by the upstream of '${input.model}'; send strings`, 'input');

  const call = AiCall.start(gw, ctx.identity, r.model, 'embeddings', ctx.requestId);
  await call.reserve({ input_tokens: inputBound(input.input) });

  if (url) {
    const raw = await ctx.rawBody();
    return forward(ctx as ActionContext<unknown>, r, call, {
      url,
      body: upstreamBody(input, raw, r.model.upstream),
      stream: false,
      inputBytes: raw.byteLength,
      usageOfJson: (j) => ({ input_tokens: num(j?.usage?.prompt_tokens ?? j?.usage?.total_tokens) }),
      errorEvent: () => '',
    });
  }

  const d = deadline(ctx.signal, upstreamTimeoutMs(gw));
  const t0 = performance.now();
  try {
    const res = await embedMany({
      model: r.adapter.embeddingModel!(r.call, r.model.upstream),
      values: strings!,
      dimensions: input.dimensions,
      maxRetries: 0,
      abortSignal: d.signal,
    });
    const used = num(res.usage?.tokens);
    await call.finish('ok', { input_tokens: used });
    const b64 = input.encoding_format === 'base64';
    return Response.json({
      object: 'list',
      data: res.embeddings.map((e, index) => ({ object: 'embedding', index, embedding: b64 ? base64Floats(e) : e })),
      model: input.model,
      usage: { prompt_tokens: used, total_tokens: used },
    });
  } catch (e) {
    const ge = toGatewayError(e, d);
    await call.finish(ge.code === CLIENT_CLOSED ? 'aborted' : 'error', {}, ge.code);
    throw ge;
  } finally {
    ctx.timing.upstreamMs += performance.now() - t0;
    d.clear();
  }
}
