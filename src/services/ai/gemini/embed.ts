// embedContent and batchEmbedContents: forwarded to a Google upstream (the model ids in a
// batch's requests rewritten to the upstream's), else embedded through the AI SDK (embedMany)
// on any upstream that embeds. Charged by input tokens as the upstream reports them; Google's
// embeddings API reports none, so those calls are charged the documented estimate (⌈UTF-8 bytes
// of the texts / 4⌉, record `estimated`), as on /v1/ai/embeddings.
import { badRequest, GatewayError } from '../../../kernel/errors.ts';
import { parseJsonBody } from '../../../kernel/input.ts';
import type { ActionContext } from '../../../kernel/service.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { AiCall, BYTES_PER_TOKEN, byteLength, tokenBound } from '../meter.ts';
import { adapters } from '../providers/index.ts';
import { candidatesOf, nativeUrlOf, routeCall, type Responder } from '../routing/route.ts';
import type { Upstream } from '../routing/upstreams.ts';
import { forwardAttempt } from '../upstream/forward.ts';
import { loadAi } from '../upstream/sdk.ts';
import { googleErrorEvent } from './errors.ts';
import { field, requestObject } from './input.ts';

type Obj = Record<string, any>;
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);

/** The text of each embed request (its content's text parts), checked. */
function textsOf(reqs: Obj[], at: (i: number) => string): string[] {
  return reqs.map((r, i) => {
    const parts = field(field(r, 'content'), 'parts');
    if (!Array.isArray(parts) || !parts.length) throw badRequest('invalid_input', `${at(i)}content.parts: required, a non-empty list of parts`, `${at(i)}content.parts`);
    return parts.map((p: Obj, j: number) => {
      if (typeof p?.text !== 'string') throw badRequest('invalid_input', `${at(i)}content.parts.${j}.text: only text parts can be embedded`, `${at(i)}content.parts.${j}.text`);
      return p.text;
    }).join(' ');
  });
}

export async function embed(ctx: ActionContext<unknown>, model: string, batch: boolean): Promise<Response> {
  const { gateway: gw } = ctx;
  const raw = await ctx.rawBody();
  const body = requestObject(parseJsonBody(raw));
  const reqs: Obj[] = batch ? field(body, 'requests') : [body];
  if (!Array.isArray(reqs) || !reqs.length || !reqs.every((r) => r && typeof r === 'object')) throw badRequest('invalid_input', 'requests: required, a non-empty list of embed requests', 'requests');
  const texts = textsOf(reqs, (i) => (batch ? `requests.${i}.` : ''));
  const dims = [...new Set(reqs.map((r) => field(r, 'outputDimensionality')))];
  const r = await resolveModel(gw, ctx.identity, model, 'embeddings');
  const serves = (u: Upstream) => nativeUrlOf(u, 'gemini') !== null || adapters[u.kind].embeddingModel !== undefined;
  if (!candidatesOf(gw, r.model).some(serves)) throw new GatewayError(400, 'mode_not_supported', `The model '${model}' cannot make embeddings.`, { param: 'model' });
  const estimate = Math.ceil(texts.reduce((n, s) => n + byteLength(s), 0) / BYTES_PER_TOKEN);

  const call = AiCall.start(gw, ctx.identity, r, 'embeddings', ctx.requestId, ctx.timing);
  await call.reserve({ input_tokens: texts.reduce((n, s) => n + tokenBound(s), 0) });
  const respond = await routeCall(ctx, call, { model: r.model, operation: 'embeddings', serves, candidates: r.candidates }, async (t, d): Promise<Responder> => {
    const base = nativeUrlOf(t.upstream, 'gemini');
    if (base) {
      const upstream = t.upstreamModel.replace(/^models\//, '');
      // a batch names its model in every request: the upstream's id there too
      const out = batch ? JSON.stringify({ ...body, requests: reqs.map((q) => ({ ...q, model: `models/${upstream}` })) }) : raw;
      return forwardAttempt(ctx, call, t, d, {
        url: `${base}/models/${upstream}:${batch ? 'batchEmbedContents' : 'embedContent'}`,
        body: out,
        stream: false,
        inputBytes: raw.byteLength,
        usageOfJson: (j) => {
          const reported = num(j?.usageMetadata?.promptTokenCount);
          return (reported ? { input_tokens: reported } : { input_tokens: estimate, estimated: true }) as object;
        },
        errorEvent: googleErrorEvent,
      });
    }
    if (dims.length > 1) throw badRequest('invalid_input', "requests: one outputDimensionality for all requests on this model's upstream", 'requests');
    const { embedMany } = await loadAi();
    const res = await embedMany({ model: await t.adapter.embeddingModel!(t.call, t.upstreamModel), values: texts, dimensions: dims[0] ?? undefined, maxRetries: 0, abortSignal: d.signal } as Parameters<typeof embedMany>[0]);
    d.clear();
    const reported = num(res.usage?.tokens);
    return async () => {
      await call.finish('ok', reported ? { input_tokens: reported } : { input_tokens: estimate, estimated: true });
      const vectors = res.embeddings.map((values) => ({ values }));
      return Response.json(batch ? { embeddings: vectors } : { embedding: vectors[0] });
    };
  });
  return respond();
}
