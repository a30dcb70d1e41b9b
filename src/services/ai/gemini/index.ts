// Google's Gemini API (Generative Language API) as Gemini CLI and @google/genai call it, under
// /v1/ai/v1beta/… and /v1beta/… (Gemini CLI, GOOGLE_GEMINI_BASE_URL) and /v1/ai/v1/… (the
// SDK's default API version v1, with baseUrl {base}/v1/ai):
//   GET  models, models/{model}
//   POST models/{model}:generateContent | :streamGenerateContent (?alt=sse: SSE; else a JSON
//        array) | :countTokens | :embedContent | :batchEmbedContents
// Routed like chat/completions (retries, fallbacks, circuit breakers): each attempt forwards to a
// Google upstream (the body as sent, the model id in the path the upstream's) or translates
// through the AI SDK onto any other. The user token (or key) comes as x-goog-api-key, ?key= or
// a bearer token; errors are Google's shape (errors.ts).
import { z } from 'zod';
import { notFound } from '../../../kernel/errors.ts';
import { parseJsonBody } from '../../../kernel/input.ts';
import { action, type ActionContext } from '../../../kernel/service.ts';
import { maxOutputOf } from '../catalog/registry.ts';
import { resolveModel } from '../catalog/resolve.ts';
import { AiCall, type CallMode } from '../meter.ts';
import { logGemini } from '../request-log.ts';
import { candidatesOf, nativeUrlOf, route, routeCall, type Responder } from '../routing/route.ts';
import type { Upstream } from '../routing/upstreams.ts';
import { UpstreamStatusError } from '../upstream/errors.ts';
import { forwardAttempt } from '../upstream/forward.ts';
import { hostedToolsRejected } from '../upstream/hosted-tools.ts';
import { sdkGenerate, sdkStream, servingPlan } from '../upstream/sdk-call.ts';
import { embed } from './embed.ts';
import { googleError, googleErrorEvent } from './errors.ts';
import { contentsOf, estimateTokens, field, maxOutputOfRequest, requestObject, sdkRequest } from './input.ts';
import { geminiModel, geminiModels } from './models.ts';
import { measuredOf, responseJson } from './output.ts';
import { asJsonArray, geminiStream } from './stream.ts';

export { geminiModels } from './models.ts';

/** The usage records' mode of calls made through the Gemini API (any chat model: its `compat` mode admits them). */
const MODE: CallMode = 'gemini';

const upstreamId = (t: { upstreamModel: string }) => t.upstreamModel.replace(/^models\//, '');

async function generate(ctx: ActionContext<unknown>, model: string, stream: boolean, sse: boolean): Promise<Response> {
  const { gateway: gw } = ctx;
  const raw = await ctx.rawBody();
  const req = requestObject(parseJsonBody(raw));
  contentsOf(req);
  const max = maxOutputOfRequest(req);
  const r = await resolveModel(gw, ctx.identity, model, 'compat');
  const plan = await servingPlan(gw, r.model, 'gemini', (ai) => sdkRequest(ai, req, hostedToolsRejected(gw.env))); // an untranslatable request is a 400 before any hold
  // a translated model gets at most what it can write (a Gemini client may ask for 65,536)
  if (plan.q?.maxOutputTokens && r.model.maxOutputTokens) plan.q.maxOutputTokens = Math.min(plan.q.maxOutputTokens, r.model.maxOutputTokens);
  const call = AiCall.start(gw, ctx.identity, r, MODE, ctx.requestId, ctx.timing);
  await call.reserve({ input_tokens: raw.byteLength, output_tokens: maxOutputOf(r.model, max) });
  const meta = { model, responseId: ctx.requestId };

  const respond = await routeCall(ctx, call, { model: r.model, operation: 'chat', serves: plan.serves, candidates: r.candidates }, (t, d): Promise<Responder> => {
    const base = nativeUrlOf(t.upstream, 'gemini');
    if (base) {
      return forwardAttempt(ctx, call, t, d, {
        // a stream is asked for as SSE always, and re-framed for a client that wants the array
        url: `${base}/models/${upstreamId(t)}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`,
        body: raw,
        stream,
        inputBytes: raw.byteLength,
        usageOfJson: (j) => measuredOf(j?.usageMetadata),
        untypedEvent: (e, acc) => {
          if (e?.error) return 'error';
          if (e?.usageMetadata) Object.assign(acc, measuredOf(e.usageMetadata));
          if (Array.isArray(e?.candidates) && e.candidates.some((c: any) => c?.finishReason)) return 'final';
        },
        errorEvent: googleErrorEvent,
      });
    }
    if (stream) return sdkStream(ctx, call, plan.q!, raw.byteLength, geminiStream(meta), t, d);
    return sdkGenerate(call, plan.q!, raw.byteLength, t, d, (res, used) => responseJson(meta, res, used));
  });
  const res = await respond();
  return stream && !sse ? asJsonArray(res) : res;
}

/** Free, like Google's: exact from a Google upstream (routed among them), else an estimate. */
async function countTokens(ctx: ActionContext<unknown>, model: string): Promise<Response> {
  const { gateway: gw } = ctx;
  const raw = await ctx.rawBody();
  const req = requestObject(parseJsonBody(raw));
  const inner = field(req, 'generateContentRequest');
  if (!inner) contentsOf(req);
  else contentsOf(inner, 'generateContentRequest.contents');
  const r = await resolveModel(gw, ctx.identity, model, 'compat');
  const serves = (u: Upstream) => nativeUrlOf(u, 'gemini') !== null;
  if (!candidatesOf(gw, r.model).some(serves)) return Response.json({ totalTokens: estimateTokens(req) });
  const text = await route(gw, { model: r.model, operation: 'count_tokens', signal: ctx.signal, timing: ctx.timing, serves }, async (t, d) => {
    const up = upstreamId(t);
    // generateContentRequest names its model: the upstream's id there too
    const body = inner ? JSON.stringify({ ...req, generateContentRequest: { ...inner, model: `models/${up}` } }) : raw;
    const res = await gw.http.request({
      method: 'POST',
      url: `${nativeUrlOf(t.upstream, 'gemini')}/models/${up}:countTokens`,
      headers: { 'content-type': 'application/json', ...t.adapter.authHeaders(t.provider) },
      body,
      abort: d,
    });
    const out = await res.text();
    d.clear();
    if (res.status >= 400) throw new UpstreamStatusError(res.status, out, res.header('retry-after') ?? undefined);
    return out;
  });
  return new Response(text, { headers: { 'content-type': 'application/json' } });
}

/** models/{rest}: GET a model, or POST one of its methods (`{model}:{method}`). */
async function modelRoute(ctx: ActionContext<Record<string, unknown>>): Promise<Response> {
  const { gateway: gw, input } = ctx;
  const colon = ctx.rest.lastIndexOf(':');
  const model = decodeURIComponent(colon < 0 ? ctx.rest : ctx.rest.slice(0, colon));
  if (ctx.request.method !== 'POST') {
    if (colon >= 0) throw notFound('action_not_found', `No method GET models/${ctx.rest}.`);
    return Response.json(await geminiModel(gw, ctx.identity, model));
  }
  const method = colon < 0 ? '' : ctx.rest.slice(colon + 1);
  switch (method) {
    case 'generateContent':
      return generate(ctx as ActionContext<unknown>, model, false, false);
    case 'streamGenerateContent':
      return generate(ctx as ActionContext<unknown>, model, true, input.alt === 'sse');
    case 'countTokens':
      return countTokens(ctx as ActionContext<unknown>, model);
    case 'embedContent':
      return embed(ctx as ActionContext<unknown>, model, false);
    case 'batchEmbedContents':
      return embed(ctx as ActionContext<unknown>, model, true);
  }
  throw notFound('action_not_found', `models/${model} has no method '${method}' here (generateContent, streamGenerateContent, countTokens, embedContent, batchEmbedContents).`);
}

const callers = ['user', 'admin'] as ('user' | 'admin')[];
/** The query the routes read (alt) or tolerate (key, pageSize, pageToken); the body is read by the handlers. */
const query = z.object({ alt: z.string().optional(), key: z.string().optional() }).loose();

const modelAction = action({
  method: 'POST',
  methods: ['GET'],
  auth: callers,
  body: 'raw',
  input: query,
  credentialHeader: 'x-goog-api-key',
  credentialQuery: 'key',
  formatError: googleError,
  maxBodyBytes: 32 * 1024 * 1024,
  requestLog: logGemini,
  produces: ['application/json', 'text/event-stream'],
  errors: [402, 429, 502, 504],
  summary: "Google's Gemini API: GET models/{model}; POST models/{model}:generateContent, :streamGenerateContent (?alt=sse), :countTokens, :embedContent, :batchEmbedContents",
  handler: modelRoute,
});

const listAction = action({
  method: 'GET',
  auth: callers,
  input: query,
  credentialHeader: 'x-goog-api-key',
  credentialQuery: 'key',
  formatError: googleError,
  summary: "Google's Gemini API: the callable models, as Google's model list ({models})",
  output: z.object({ models: z.array(z.object({ name: z.string(), displayName: z.string(), supportedGenerationMethods: z.array(z.string()) }).loose()) }),
  handler: async ({ gateway: gw, identity }) => ({ models: await geminiModels(gw, identity) }),
});

/** The actions under /v1/ai: v1beta (Gemini CLI) and v1 (the SDK's default; its model list is the v1/models action, shared with Anthropic's). */
export const geminiActions = {
  'v1beta/models': listAction,
  'v1beta/models/*': modelAction,
  'v1/models/*': modelAction,
};

/** Served at the root too: GOOGLE_GEMINI_BASE_URL / baseUrl = the gateway's origin. */
export const geminiMounts = { '/v1beta': 'v1beta' };
