// ai: the model catalog, text, UI-message streams, the Chat Completions endpoint, image and
// video jobs, speech. Models live in catalog/ (registry, prices, resolve); the upstream side in upstream/, routing/ and
// providers/; media/ (speech, image and video jobs); money and metering around every call in meter.ts.
import { logChat, logMessages, logResponses, logUiStream, logWhole } from './request-log.ts';
import { addSecretSource } from '../../kernel/redact.ts';
import { z } from 'zod';
import { notFound } from '../../kernel/errors.ts';
import { action, defineService } from '../../kernel/service.ts';
import { chatCompletions, chatInput } from './chat/index.ts';
import { embeddings, embeddingsInput } from './embeddings/index.ts';
import { responses, responsesInput } from './responses/index.ts';
import { compact, compactInput } from './responses/compact.ts';
import { anthropicError, countTokens, countTokensInput, messages, messagesInput } from './messages/index.ts';
import { imageCreate, imageCreateInput, imageResult, jobIdInput, runImage, runVideo, video, videoInput } from './media/jobs.ts';
import { asr, ASR_MAX_BYTES, asrJson, tts, ttsInput } from './media/speech.ts';
import { modesOf, priceSourceOf, pricesOf } from './catalog/prices.ts';
import { registryOf } from './state.ts';
import { allModels, callerCity, unavailableReason } from './catalog/resolve.ts';
import { cityAllows, cityPrices, keyAllows } from './catalog/city-prices.ts';
import { modelActions } from './catalog/model-actions.ts';
import { upstreamActions } from './routing/actions.ts';
import { candidatesOf } from './routing/route.ts';
import { upstreamTableOf } from './routing/upstreams.ts';
import { stream, text, textInput } from './text/index.ts';
import { geminiActions, geminiModels, geminiMounts } from './gemini/index.ts';

export { priceOf, pricesOf } from './catalog/prices.ts';
export { AI_CONFIG } from './state.ts';
export type { AiConfig, ModelDef, ProviderSlot, Mode } from './catalog/registry.ts';

const callers = ['user', 'admin'] as ('user' | 'admin')[];
/** Errors of calls that reach an upstream (for the API reference). */
const UPSTREAM = [402, 429, 502, 504];
const usage = z.object({ input_tokens: z.number(), output_tokens: z.number(), cached_tokens: z.number().optional(), total_tokens: z.number() }).loose();
const textMessage = z.object({
  id: z.string(),
  role: z.literal('assistant'),
  parts: z.array(z.object({ type: z.literal('text'), text: z.string() })),
  metadata: z.object({ model: z.string(), usage, finish_reason: z.string() }),
});
const file = z.object({ url: z.string(), media_type: z.string() });
const job = z.object({
  job_id: z.string(),
  status: z.enum(['queued', 'running', 'succeeded', 'failed']),
  model: z.string().optional(),
  created_at: z.number().optional().describe('epoch ms'),
  images: z.array(file).optional(),
  videos: z.array(file).optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});
const modelEntry = z
  .object({ id: z.string(), name: z.string(), description: z.string(), modalities: z.array(z.string()), tags: z.array(z.string()), meta: z.record(z.string(), z.unknown()) })
  .loose();

const openaiModel = z.object({ id: z.string(), object: z.literal('model'), created: z.number(), owned_by: z.string() }).loose();

// The Messages API as the Anthropic SDK and Claude Code call it: the user token as a bearer
// token or as x-api-key, errors in Anthropic's shape. Served at /v1/ai/messages and at
// /v1/ai/v1/messages (those clients append /v1/messages to their base URL).
const messagesAction = action({
  requestLog: logMessages,
  method: 'POST',
  auth: callers,
  input: messagesInput,
  credentialHeader: 'x-api-key',
  formatError: anthropicError,
  maxBodyBytes: 32 * 1024 * 1024,
  produces: ['application/json', 'text/event-stream'],
  errors: UPSTREAM,
  summary: 'Anthropic Messages API (JSON and SSE)',
  handler: messages,
});
const countTokensAction = action({
  method: 'POST',
  auth: callers,
  input: countTokensInput,
  credentialHeader: 'x-api-key',
  formatError: anthropicError,
  maxBodyBytes: 32 * 1024 * 1024,
  output: z.object({ input_tokens: z.number() }),
  summary: 'Anthropic Messages API token count (exact on Anthropic upstreams, estimated on the others; free)',
  handler: countTokens,
});

const emptyAnthropicList = { data: [], has_more: false, first_id: null, last_id: null };

const FILE_KEY = /^ai\/[A-Za-z0-9_-]{1,64}\/[A-Za-z0-9_-]{16,64}\.[a-z0-9]{1,5}$/;

export const aiService = defineService({
  id: 'ai',
  name: 'AI',
  description: 'Model catalog, text and streaming generation, Chat Completions, images, video and speech.',
  env: [
    { key: 'TEXTPROVIDER_API_KEY', description: 'Key of the text provider (any OpenAI-compatible API)', required: true },
    { key: 'TEXTPROVIDER_BASE_URL', description: 'Base URL of the text provider (default https://api.openai.com/v1)', required: false },
    { key: 'TEXTPROVIDER_MODELS', description: 'Text provider models: comma-separated id or id=upstream_id (default gpt-4o-mini)', required: false },
    { key: 'OPENAI_API_KEY', description: 'OpenAI key (text, images, speech, transcription, video)', required: false },
    { key: 'OPENAI_BASE_URL', description: 'OpenAI base URL (default https://api.openai.com/v1)', required: false },
    { key: 'ANTHROPIC_API_KEY', description: 'Anthropic key', required: false },
    { key: 'GOOGLE_GENERATIVE_AI_API_KEY', description: 'Google Gemini key', required: false },
    { key: 'MODEL_PRICES', description: 'JSON price overrides by model id (credits; 1 USD = 1,000,000)', required: false },
    { key: 'MODEL_MODES', description: 'JSON: model id → the modes callers may use (narrows the registered ones)', required: false },
    { key: 'AI_UPSTREAM_TIMEOUT_MS', description: 'Upstream deadline in ms (default 120000): per attempt, to the first byte for streams', required: false },
    { key: 'AI_STREAM_IDLE_TIMEOUT_MS', description: 'A stream that gets no byte from its upstream for this long is ended with an error event and charged by the estimate (default 60000; 0: no limit)', required: false },
    { key: 'AI_MAX_ATTEMPTS', description: 'Upstream attempts per call, retries and fallbacks included (default 3)', required: false },
    { key: 'AI_COOLDOWN_FAILURES', description: 'Consecutive failures after which an upstream cools down (default 3)', required: false },
    { key: 'AI_COOLDOWN_MS', description: 'Cooldown of a failing upstream in ms, then one probe call (default 30000)', required: false },
    { key: 'AI_RETRY_BACKOFF_MS', description: 'Base of the jittered exponential backoff between attempts (default 100)', required: false },
    { key: 'AI_HOSTED_TOOLS', description: "Hosted tools (web_search, Anthropic server tools) on an upstream that cannot run them: 'drop' (default: left out, named in x-citygate-dropped-tools and the usage record's note) or 'reject' (400 naming the tool)", required: false },
    { key: 'AI_RETRY_AFTER_MAX_MS', description: 'Longest Retry-After or cooldown a call waits for before giving up (default 10000)', required: false },
  ],
  init(gw) {
    addSecretSource(() => upstreamTableOf(gw).rows.map((u) => u.apiKey)); // kept out of relayed upstream text
    const reg = registryOf(gw); // builds the registry now: a bad citygate.config.ts fails the boot, not a request
    if (gw.services.has('balance')) {
      // Charging is on: a model without a price is free to call, which an operator should know.
      const free = reg.all(gw.env).filter((m) => !pricesOf(gw, m)).map((m) => m.id);
      if (free.length) gw.log('warn', 'models without a price are free to call', { models: free });
    }
  },
  jobs: { image: runImage, video: runVideo },
  // Google's /v1beta; and OpenAI's client paths on a base URL of {base}/v1 (Codex's openai_base_url): /v1/responses, /v1/responses/compact
  mounts: { ...geminiMounts, '/v1/responses': 'responses' },
  actions: {
    models: action({
      method: 'GET',
      auth: ['user', 'admin', 'bureau'],
      summary:
        "Model catalog (callable models, at the caller's city's prices, within its allow-list; the admin sees every registered model at base prices), also as an OpenAI model list",
      output: z.object({ items: z.array(modelEntry), object: z.literal('list'), data: z.array(openaiModel) }),
      handler: async ({ gateway: gw, identity }) => {
        await upstreamTableOf(gw).fresh();
        const reg = registryOf(gw);
        const admin = identity.kind === 'admin';
        const city = await callerCity(gw, identity);
        const items = [];
        const data = [];
        for (const m of allModels(gw)) {
          const modalities = modesOf(gw, m);
          const available = candidatesOf(gw, m).length > 0 && modalities.length > 0;
          if (!admin && !available) continue;
          if (!cityAllows(city, m.id, m.id) && !(m.aliases ?? []).some((a) => cityAllows(city, m.id, a))) continue;
          if (!keyAllows(identity, m.id, m.id) && !(m.aliases ?? []).some((a) => keyAllows(identity, m.id, a))) continue;
          const price = admin ? pricesOf(gw, m) : cityPrices(city, m.id, pricesOf(gw, m));
          const base = { id: m.id, name: m.name, description: m.description ?? '', modalities, tags: m.tags ?? [], meta: m.meta ?? {}, aliases: m.aliases ?? [], price };
          items.push(
            admin
              ? {
                  ...base,
                  env_requirements: m.provider ? reg.requirements(m) : [],
                  default_modes: m.modes,
                  price_source: priceSourceOf(gw, m),
                  available,
                  ...(available ? {} : { unavailable_reason: unavailableReason(gw, m) }),
                  provider: m.provider || null,
                  upstream: m.upstream,
                  upstreams: candidatesOf(gw, m).map((u) => u.id),
                }
              : base,
          );
          // The OpenAI list shape, so `client.models.list()` sees the same models.
          data.push({ id: m.id, object: 'model' as const, created: 0, owned_by: m.provider || 'citygate', ...(price ? { price } : {}) });
        }
        return { items, object: 'list' as const, data };
      },
    }),
    ...upstreamActions,
    ...modelActions,
    text: action({ method: 'POST', auth: callers, requestLog: logWhole, input: textInput, output: textMessage, errors: UPSTREAM, summary: 'Generate one assistant message', handler: text }),
    stream: action({ method: 'POST', auth: callers, requestLog: logUiStream, input: textInput, produces: ['text/event-stream'], errors: UPSTREAM, summary: 'Stream an assistant message (AI SDK UI message stream)', handler: stream }),
    'chat/completions': action({
      method: 'POST',
      auth: callers,
      input: chatInput,
      maxBodyBytes: 8 * 1024 * 1024,
      produces: ['application/json', 'text/event-stream'],
      errors: UPSTREAM,
      summary: 'OpenAI Chat Completions (JSON and SSE)',
      requestLog: logChat,
      handler: chatCompletions,
    }),
    embeddings: action({
      method: 'POST',
      auth: callers,
      input: embeddingsInput,
      maxBodyBytes: 8 * 1024 * 1024,
      produces: ['application/json'],
      errors: UPSTREAM,
      summary: 'OpenAI Embeddings (strings or token arrays; float or base64)',
      requestLog: logWhole,
      handler: embeddings,
    }),
    responses: action({
      method: 'POST',
      auth: callers,
      input: responsesInput,
      maxBodyBytes: 32 * 1024 * 1024,
      produces: ['application/json', 'text/event-stream'],
      errors: UPSTREAM,
      summary: 'OpenAI Responses API, stateless (JSON and SSE)',
      requestLog: logResponses,
      handler: responses,
    }),
    'responses/compact': action({
      method: 'POST',
      auth: callers,
      input: compactInput,
      maxBodyBytes: 32 * 1024 * 1024,
      produces: ['application/json'],
      errors: UPSTREAM,
      summary: 'OpenAI Responses API compaction: the user messages kept and one compaction item (forwarded to OpenAI, written by the routed model elsewhere)',
      requestLog: logResponses,
      handler: compact,
    }),
    messages: messagesAction,
    'messages/count_tokens': countTokensAction,
    'v1/messages': messagesAction,
    // The Anthropic SDK's `models.list()` (GET {base}/v1/models): the callable chat models. The
    // same path is @google/genai's `models.list()` on its default API version (v1), whose
    // credential comes as x-goog-api-key: Google's list rides along as `models`.
    'v1/models': action({
      method: 'GET',
      auth: callers,
      credentialHeader: ['x-api-key', 'x-goog-api-key'],
      credentialQuery: 'key',
      formatError: anthropicError,
      summary: 'The callable models that speak the Messages API, as the Anthropic model list (`data`), and as Google\'s (`models`)',
      output: z.object({
        data: z.array(z.object({ type: z.literal('model'), id: z.string(), display_name: z.string(), created_at: z.string() })),
        has_more: z.boolean(),
        first_id: z.string().nullable(),
        last_id: z.string().nullable(),
        models: z.array(z.object({ name: z.string() }).loose()).optional(),
      }),
      handler: async ({ gateway: gw, identity, request }) => {
        if (request.headers.has('x-goog-api-key') || new URL(request.url).searchParams.has('key')) return { ...emptyAnthropicList, models: await geminiModels(gw, identity) };
        await upstreamTableOf(gw).fresh();
        const city = await callerCity(gw, identity);
        const data = allModels(gw)
          .filter((m) => cityAllows(city, m.id, m.id) && keyAllows(identity, m.id, m.id) && modesOf(gw, m).includes('messages') && candidatesOf(gw, m).length > 0)
          .map((m) => ({ type: 'model' as const, id: m.id, display_name: m.name, created_at: '1970-01-01T00:00:00Z' }));
        return { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
      },
    }),
    'v1/messages/count_tokens': countTokensAction,
    ...geminiActions,
    'image/create': action({ method: 'POST', auth: callers, requestLog: logWhole, input: imageCreateInput, output: job, errors: UPSTREAM, summary: 'Start an image generation job', handler: imageCreate }),
    'image/result': action({ method: 'POST', auth: callers, input: jobIdInput, output: job, summary: 'Poll an image job', handler: imageResult }),
    video: action({ method: 'POST', auth: callers, requestLog: logWhole, input: videoInput, output: job, errors: UPSTREAM, summary: 'Start a video job ({model, prompt}) or poll one ({job_id})', handler: video }),
    tts: action({ method: 'POST', auth: callers, requestLog: logWhole, input: ttsInput, produces: ['audio/mpeg', 'audio/wav', 'audio/ogg', 'audio/aac', 'audio/flac', 'audio/pcm'], errors: UPSTREAM, summary: 'Text to speech (audio bytes)', handler: tts }),
    asr: action({
      method: 'POST',
      auth: callers,
      body: 'raw',
      input: z.object({ city_id: z.string().optional() }).loose(),
      bodySchema: asrJson,
      errors: UPSTREAM,
      maxBodyBytes: Math.ceil(ASR_MAX_BYTES * 1.4),
      summary: 'Speech recognition (JSON with base64 audio or an https URL, or multipart)',
      requestLog: logWhole,
      handler: asr,
    }),
    'files/*': action({
      method: 'GET',
      auth: [],
      summary: 'A generated file (unguessable URL)',
      produces: ['application/octet-stream'],
      handler: async ({ gateway: gw, rest }) => {
        if (!FILE_KEY.test(rest) || !gw.storage) throw notFound('file_not_found', 'No such file.');
        const obj = await gw.storage.get(rest);
        if (!obj) throw notFound('file_not_found', 'No such file.');
        const headers: Record<string, string> = { 'content-type': obj.contentType, 'cache-control': 'private, max-age=86400, immutable' };
        if (obj.size !== undefined) headers['content-length'] = String(obj.size);
        return new Response(obj.body as BodyInit, { headers });
      },
    }),
  },
});
