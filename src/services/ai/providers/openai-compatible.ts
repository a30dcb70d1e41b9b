// Any OpenAI-compatible API (the seed's text provider slot): chat/completions is forwarded
// byte for byte; text and stream go through the AI SDK's openai-compatible provider.
import { once } from '../upstream/sdk.ts';
import type { ProviderAdapter } from './types.ts';

const load = once(() => import('@ai-sdk/openai-compatible'));

export const openaiCompatibleAdapter: ProviderAdapter = {
  kind: 'openai-compatible',
  chatCompletionsUrl: (p) => (p.slot.passthrough === false ? null : `${p.baseUrl}/chat/completions`),
  authHeaders: (p) => ({ authorization: `Bearer ${p.apiKey}` }),
  // Embeddings are part of the OpenAI-compatible core; the Responses API is not assumed.
  nativeUrl: (p, api) => (api === 'embeddings' && p.slot.passthrough !== false ? `${p.baseUrl}/embeddings` : null),
  languageModel: async (c, id) =>
    (await load()).createOpenAICompatible({
      name: c.provider.slot.id,
      baseURL: c.provider.baseUrl,
      apiKey: c.provider.apiKey,
      includeUsage: true,
      fetch: c.http.fetch,
    }).chatModel(id),
  embeddingModel: async (c, id) =>
    (await load()).createOpenAICompatible({ name: c.provider.slot.id, baseURL: c.provider.baseUrl, apiKey: c.provider.apiKey, fetch: c.http.fetch }).embeddingModel(id),
};
